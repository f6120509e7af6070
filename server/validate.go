package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/service"
)

// Every field is checked here, at the edge, with a message that names the
// field and the rule; the state machine checks the same rules again.

func duration(field string, d *durationpb.Duration, def time.Duration) (time.Duration, error) {
	if d == nil {
		return def, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, leasehold.Errorf(leasehold.CodeInvalid, "%s is not a valid duration", field)
	}
	return d.AsDuration(), nil
}

// requestID checks a request_id, making one when empty.
func requestID(id string) (string, error) {
	if id == "" {
		return randomHex(16), nil
	}
	if err := optionalRequestID(id); err != nil {
		return "", err
	}
	return id, nil
}

// optionalRequestID checks a request_id that may be empty (no dedup).
func optionalRequestID(id string) error {
	return leasehold.ValidateName("request_id", id, leasehold.MaxRequestIDLen, false)
}

// secretHash parses a caller's secret (32 hex characters) or, when empty,
// makes one. Only the hash goes into the log.
func secretHash(s string) (secret string, hash [32]byte, err error) {
	if s == "" {
		s = randomHex(leasehold.SecretBytes)
	}
	raw, err := hex.DecodeString(s)
	if err != nil || len(raw) != leasehold.SecretBytes {
		return "", hash, leasehold.Errorf(leasehold.CodeInvalid,
			"secret must be %d hex characters (%d random bytes)", 2*leasehold.SecretBytes, leasehold.SecretBytes)
	}
	return s, sha256.Sum256(raw), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// acquireCommand checks an AcquireRequest from caller (see caller) and
// builds its command: a lock's acquire, or a semaphore's with a limit.
func acquireCommand(m *pb.AcquireRequest, caller string) (ask service.Ask, secret string, err error) {
	cmd, secret, err := lockCommand(m, caller)
	if err != nil || m.Limit == 0 {
		return cmd, secret, err
	}
	return &service.SemAcquire{Acquire: *cmd, Limit: int(m.Limit)}, secret, nil
}

// lockCommand is acquireCommand's shared part: every field but the limit.
func lockCommand(m *pb.AcquireRequest, caller string) (cmd *service.Acquire, secret string, err error) {
	cmd = &service.Acquire{Resources: m.Resources, Owner: m.Owner, Operation: m.Operation, Metadata: m.Metadata, Caller: caller}
	if err := leasehold.ValidateResources(m.Resources); err != nil {
		return nil, "", err
	}
	for _, r := range m.Resources {
		if err := leasehold.Reserved("resource", r); err != nil {
			return nil, "", err
		}
	}
	if err := leasehold.ValidateName("owner", m.Owner, leasehold.MaxOwnerLen, false); err != nil {
		return nil, "", err
	}
	if err := leasehold.ValidateName("operation", m.Operation, leasehold.MaxOperationLen, false); err != nil {
		return nil, "", err
	}
	if err := leasehold.ValidateMetadata(m.Metadata); err != nil {
		return nil, "", err
	}
	if m.Limit > leasehold.MaxSemaphoreLimit {
		return nil, "", leasehold.Errorf(leasehold.CodeInvalid, "limit is %d; a semaphore has 1 to %d slots", m.Limit, leasehold.MaxSemaphoreLimit)
	}
	if m.Limit > 0 && len(m.Resources) != 1 {
		return nil, "", leasehold.Errorf(leasehold.CodeInvalid,
			"a semaphore acquire (limit %d) names one semaphore, not %d resources; acquire the others separately", m.Limit, len(m.Resources))
	}
	if cmd.TTL, err = duration("ttl", m.Ttl, leasehold.DefaultTTL); err != nil {
		return nil, "", err
	}
	if err := leasehold.ValidateDuration("ttl", cmd.TTL, leasehold.MinTTL, leasehold.MaxTTL); err != nil {
		return nil, "", err
	}
	if cmd.Wait, err = duration("wait", m.Wait, 0); err != nil {
		return nil, "", err
	}
	if err := leasehold.ValidateDuration("wait", cmd.Wait, 0, leasehold.MaxWait); err != nil {
		return nil, "", err
	}
	if cmd.LockDelay, err = duration("lock_delay", m.LockDelay, 0); err != nil {
		return nil, "", err
	}
	if err := leasehold.ValidateDuration("lock_delay", cmd.LockDelay, 0, leasehold.MaxLockDelay); err != nil {
		return nil, "", err
	}
	if cmd.MaxHold, err = duration("max_hold", m.MaxHold, 0); err != nil {
		return nil, "", err
	}
	if cmd.MaxHold != 0 {
		if err := leasehold.ValidateDuration("max_hold", cmd.MaxHold, cmd.TTL, leasehold.MaxMaxHold); err != nil {
			return nil, "", leasehold.Errorf(leasehold.CodeInvalid, "%v (max_hold may not be shorter than the ttl)", err)
		}
	}
	if cmd.RequestID, err = requestID(m.RequestId); err != nil {
		return nil, "", err
	}
	if m.RequestId != "" && m.Secret == "" {
		// A retry finds its first answer only under the same secret, and
		// a node-made secret differs on every try: the retry would
		// acquire again, while the first grant waits out its TTL.
		return nil, "", leasehold.Errorf(leasehold.CodeInvalid,
			"an acquire with a request_id needs a secret: a retry is recognised by its request_id and secret together, "+
				"and only the secret can renew or release what it gets; send a secret (%d hex characters) you keep, "+
				"or neither (the node then makes both)", 2*leasehold.SecretBytes)
	}
	if secret, cmd.SecretHash, err = secretHash(m.Secret); err != nil {
		return nil, "", err
	}
	cmd.Attempt = randomHex(8)
	return cmd, secret, nil
}

func leaseRef(id uint64, secret string) ([32]byte, error) {
	if id == 0 {
		return [32]byte{}, leasehold.Errorf(leasehold.CodeInvalid, "lease_id must be set (the id returned by Acquire)")
	}
	if secret == "" {
		return [32]byte{}, leasehold.Errorf(leasehold.CodeInvalid, "secret must be set (the secret returned by Acquire)")
	}
	_, h, err := secretHash(secret)
	return h, err
}

func renewCommand(m *pb.RenewRequest, caller string) (*service.Renew, error) {
	h, err := leaseRef(m.LeaseId, m.Secret)
	if err != nil {
		return nil, err
	}
	if err := leasehold.ValidateName("progress", m.Progress, leasehold.MaxProgressLen, false); err != nil {
		return nil, err
	}
	id, err := requestID(m.RequestId)
	if err != nil {
		return nil, err
	}
	return &service.Renew{RequestID: id, LeaseID: m.LeaseId, SecretHash: h, Progress: m.Progress, Caller: caller}, nil
}

func releaseCommand(m *pb.ReleaseRequest, caller string) (*service.Release, error) {
	h, err := leaseRef(m.LeaseId, m.Secret)
	if err != nil {
		return nil, err
	}
	id, err := requestID(m.RequestId)
	if err != nil {
		return nil, err
	}
	return &service.Release{RequestID: id, LeaseID: m.LeaseId, SecretHash: h, Caller: caller}, nil
}

func listParams(m *pb.ListRequest) (after uint64, limit int, err error) {
	if err := leasehold.ValidateName("prefix", m.Prefix, leasehold.MaxResourceLen, false); err != nil {
		return 0, 0, err
	}
	if limit, err = pageSize(m.PageSize); err != nil {
		return 0, 0, err
	}
	if m.PageToken != "" {
		if after, err = strconv.ParseUint(m.PageToken, 10, 64); err != nil {
			return 0, 0, leasehold.Errorf(leasehold.CodeInvalid, "page_token is not one this server issued")
		}
	}
	return after, limit, nil
}

// pageSize checks a list's page_size (0: the default).
func pageSize(n int32) (int, error) {
	switch {
	case n < 0 || n > leasehold.MaxListLimit:
		return 0, leasehold.Errorf(leasehold.CodeInvalid, "page_size is %d; it must be between 1 and %d", n, leasehold.MaxListLimit)
	case n == 0:
		return leasehold.DefaultListLimit, nil
	}
	return int(n), nil
}
