package server

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/service"
)

// The KV transaction: checked whole at the edge (counts and bytes against
// the node's limits, every key, every compare, every lease proof), so a
// bad request is refused with the field it got wrong before it reaches
// the log; the state machine checks the same rules again.

var compareOps = map[pb.CompareOp]leasehold.CompareOp{
	pb.CompareOp_COMPARE_OP_VERSION_EQUAL:   leasehold.CompareVersionEqual,
	pb.CompareOp_COMPARE_OP_VERSION_GREATER: leasehold.CompareVersionGreater,
	pb.CompareOp_COMPARE_OP_VERSION_LESS:    leasehold.CompareVersionLess,
	pb.CompareOp_COMPARE_OP_VALUE_EQUAL:     leasehold.CompareValueEqual,
	pb.CompareOp_COMPARE_OP_EXISTS:          leasehold.CompareExists,
	pb.CompareOp_COMPARE_OP_ABSENT:          leasehold.CompareAbsent,
}

func (h kvAPI) Txn(ctx context.Context, req *connect.Request[pb.TxnRequest]) (*connect.Response[pb.TxnResponse], error) {
	s, m := h.s, req.Msg
	cmd, err := txnRequest(m)
	if err != nil {
		return nil, err
	}
	m.RequestId = cmd.RequestID
	res, index, err := s.svc.Txn(ctx, cmd)
	if err = s.fenceResult(err, "txn"); err != nil {
		return nil, err
	}
	branch, ops := "then", cmd.Then
	if !res.Succeeded {
		branch, ops = "else", cmd.Else
	}
	s.metrics.Txns.WithLabelValues(branch).Inc()
	out := &pb.TxnResponse{Succeeded: res.Succeeded, Compares: res.Compares, Index: index}
	for i, op := range ops {
		out.Results = append(out.Results, &pb.TxnOpResult{Key: op.Key, Version: res.Versions[i]})
	}
	return connect.NewResponse(out), nil
}

// txnRequest checks a TxnRequest and builds the service's request.
func txnRequest(m *pb.TxnRequest) (*service.TxnRequest, error) {
	if len(m.Compares) > leasehold.MaxTxnCompares {
		return nil, leasehold.Errorf(leasehold.CodeLimit,
			"the transaction has %d compares; the limit is %d (max_txn_compares)", len(m.Compares), leasehold.MaxTxnCompares)
	}
	for _, b := range [...]struct {
		name string
		ops  []*pb.TxnOp
	}{{"then_ops", m.ThenOps}, {"else_ops", m.ElseOps}} {
		if len(b.ops) > leasehold.MaxTxnOps {
			return nil, leasehold.Errorf(leasehold.CodeLimit,
				"%s has %d operations; the limit is %d per branch (max_txn_ops)", b.name, len(b.ops), leasehold.MaxTxnOps)
		}
	}
	if len(m.ThenOps) == 0 && len(m.ElseOps) == 0 {
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "the transaction has no operations: give then_ops, else_ops or both")
	}
	cmd := &service.TxnRequest{}
	total := 0
	for i, c := range m.Compares {
		cmp, err := compare(i, c)
		if err != nil {
			return nil, err
		}
		total += len(c.Value)
		cmd.Compares = append(cmd.Compares, cmp)
	}
	var err error
	if cmd.Then, err = txnOps("then_ops", m.ThenOps, &total); err != nil {
		return nil, err
	}
	if cmd.Else, err = txnOps("else_ops", m.ElseOps, &total); err != nil {
		return nil, err
	}
	if total > leasehold.MaxTxnBytes {
		return nil, leasehold.Errorf(leasehold.CodeLimit,
			"the transaction carries %d bytes of values; the limit is %d (max_txn_bytes)", total, leasehold.MaxTxnBytes)
	}
	if cmd.Fence, err = fencePB(m.Fence, "fence."); err != nil {
		return nil, err
	}
	if cmd.RequestID, err = requestID(m.RequestId); err != nil {
		return nil, err
	}
	return cmd, nil
}

func compare(i int, c *pb.Compare) (leasehold.Compare, error) {
	field := fmt.Sprintf("compares[%d]", i)
	if err := keyOf(c.Key); err != nil {
		return leasehold.Compare{}, leasehold.Errorf(leasehold.CodeInvalid, "%s: %v", field, err)
	}
	op, ok := compareOps[c.Op]
	if !ok {
		return leasehold.Compare{}, leasehold.Errorf(leasehold.CodeInvalid,
			"%s.op must be one of COMPARE_OP_VERSION_EQUAL, _VERSION_GREATER, _VERSION_LESS, _VALUE_EQUAL, _EXISTS, _ABSENT", field)
	}
	if op != leasehold.CompareValueEqual && len(c.Value) > 0 {
		return leasehold.Compare{}, leasehold.Errorf(leasehold.CodeInvalid, "%s.value is only for COMPARE_OP_VALUE_EQUAL", field)
	}
	if len(c.Value) > leasehold.MaxValueBytes {
		return leasehold.Compare{}, leasehold.Errorf(leasehold.CodeInvalid,
			"%s.value is %d bytes; the limit is %d", field, len(c.Value), leasehold.MaxValueBytes)
	}
	return leasehold.Compare{Key: c.Key, Op: op, Version: c.Version, Value: c.Value}, nil
}

// txnOps converts one branch, adding its value bytes to *total.
func txnOps(branch string, in []*pb.TxnOp, total *int) ([]leasehold.TxnOp, error) {
	var out []leasehold.TxnOp
	seen := make(map[string]bool, len(in))
	for i, o := range in {
		field := fmt.Sprintf("%s[%d]", branch, i)
		var op leasehold.TxnOp
		switch {
		case o.GetPut() != nil:
			p := o.GetPut()
			op = leasehold.TxnOp{Key: p.Key, Value: p.Value}
			if len(p.Value) > leasehold.MaxValueBytes {
				return nil, leasehold.Errorf(leasehold.CodeInvalid,
					"%s.put.value is %d bytes; the limit is %d", field, len(p.Value), leasehold.MaxValueBytes)
			}
			proof, err := leaseProof(field+".put", p.LeaseId, p.LeaseSecret)
			if err != nil {
				return nil, err
			}
			op.Lease = proof
			*total += len(p.Value)
		case o.GetDelete() != nil:
			op = leasehold.TxnOp{Delete: true, Key: o.GetDelete().Key}
		default:
			return nil, leasehold.Errorf(leasehold.CodeInvalid, "%s must be a put or a delete", field)
		}
		if err := writtenKeyOf(op.Key); err != nil {
			return nil, leasehold.Errorf(leasehold.CodeInvalid, "%s: %v", field, err)
		}
		if seen[op.Key] {
			return nil, leasehold.Errorf(leasehold.CodeInvalid,
				"%s writes key %q a second time; write each key once per branch", field, op.Key)
		}
		seen[op.Key] = true
		out = append(out, op)
	}
	return out, nil
}

// leaseProof checks a write's lease binding: both the lease id and its
// secret, or neither.
func leaseProof(field string, id uint64, secret string) (*leasehold.LeaseProof, error) {
	if id == 0 && secret == "" {
		return nil, nil
	}
	if id == 0 {
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "%s has a lease_secret but no lease_id; give both to bind the key to a lease", field)
	}
	if secret == "" {
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "%s has a lease_id but no lease_secret; give both to bind the key to a lease", field)
	}
	_, h, err := secretHash(secret)
	if err != nil {
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "%s.lease_secret: %v", field, err)
	}
	return &leasehold.LeaseProof{ID: id, SecretHash: h}, nil
}
