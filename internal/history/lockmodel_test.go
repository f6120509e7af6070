package history

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestLockModelCatchesOverlap: a grant while another holder's release had
// not even been sent is refused by the lock model; the same grant after
// the release is fine.
func TestLockModelCatchesOverlap(t *testing.T) {
	m := LockModel.ToModel()
	op := func(client int, in LockIn, out LockOut, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
	}
	acq := func(lease, token uint64) (LockIn, LockOut) {
		return LockIn{Op: LockAcquire, Resource: "r", Lease: lease}, LockOut{Res: LockOK, Token: token}
	}
	rel := LockIn{Op: LockRelease, Resource: "r", Lease: 5}
	a5, o5 := acq(5, 5)
	a9, o9 := acq(9, 9)
	fine := []porcupine.Operation{op(0, a5, o5, 0, 10), op(0, rel, LockOut{Res: LockOK}, 100, 110), op(1, a9, o9, 120, 130)}
	overlap := []porcupine.Operation{op(0, a5, o5, 0, 10), op(1, a9, o9, 20, 50), op(0, rel, LockOut{Res: LockOK}, 100, 110)}
	if !porcupine.CheckOperations(m, fine) {
		t.Error("a good history was refused")
	}
	if porcupine.CheckOperations(m, overlap) {
		t.Error("a release answered OK after another holder was granted was not refused")
	}
}
