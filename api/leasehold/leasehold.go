// Package leasehold holds the vocabulary shared by the client, the CLI,
// the node's API edge and its state machine: each primitive's types and
// limits (a file each), the error codes and the input rules. It has no
// dependencies beyond the standard library.
package leasehold

import (
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits of every request, enforced at the API edge and again in the
// state machine. Each primitive's own limits and types are in its file:
// leases.go, kv.go, elections.go, idempotency.go, queues.go, groups.go.
const (
	MaxRequestIDLen  = 64
	DefaultListLimit = 100
	MaxListLimit     = 1000
	MaxBatchOps      = 256  // operations in one Leases.Batch request
	MaxSessionOps    = 1024 // unanswered operations on one session stream
)

// ValidateName checks a resource name, owner or operation: non-empty when
// required, valid UTF-8, printable, and at most max bytes.
func ValidateName(field, s string, max int, required bool) error {
	if s == "" {
		if required {
			return Errorf(CodeInvalid, "%s must not be empty", field)
		}
		return nil
	}
	if len(s) > max {
		return Errorf(CodeInvalid, "%s is %d bytes long; the limit is %d", field, len(s), max)
	}
	if !utf8.ValidString(s) {
		return Errorf(CodeInvalid, "%s is not valid UTF-8", field)
	}
	for i, r := range s {
		if !unicode.IsPrint(r) {
			return Errorf(CodeInvalid, "%s has a control or non-printable character at byte %d", field, i)
		}
	}
	return nil
}

// ValidateResources checks a resource list: 1..MaxResources distinct names.
func ValidateResources(rs []string) error {
	if len(rs) == 0 {
		return Errorf(CodeInvalid, "resources must name at least one resource")
	}
	if len(rs) > MaxResources {
		return Errorf(CodeInvalid, "resources names %d resources; the limit is %d", len(rs), MaxResources)
	}
	seen := make(map[string]struct{}, len(rs))
	for _, r := range rs {
		if err := ValidateName("resource name", r, MaxResourceLen, true); err != nil {
			return err
		}
		if _, dup := seen[r]; dup {
			return Errorf(CodeInvalid, "resource %q is named twice", r)
		}
		seen[r] = struct{}{}
	}
	return nil
}

// ValidateDuration checks that min <= d <= max; min 0 allows zero.
func ValidateDuration(field string, d, min, max time.Duration) error {
	if d < min || d > max {
		if min == 0 {
			return Errorf(CodeInvalid, "%s is %v; it must be between 0 and %v", field, d, max)
		}
		return Errorf(CodeInvalid, "%s is %v; it must be between %v and %v", field, d, min, max)
	}
	return nil
}

// ValidateMetadata checks the metadata map: keys and values are names, and
// together they fit in MaxMetadataBytes.
func ValidateMetadata(md map[string]string) error {
	total := 0
	for k, v := range md {
		if err := ValidateName("metadata key", k, MaxMetadataBytes, true); err != nil {
			return err
		}
		if !utf8.ValidString(v) {
			return Errorf(CodeInvalid, "metadata value for %q is not valid UTF-8", k)
		}
		total += len(k) + len(v)
	}
	if total > MaxMetadataBytes {
		return Errorf(CodeInvalid, "metadata is %d bytes; the limit is %d", total, MaxMetadataBytes)
	}
	return nil
}
