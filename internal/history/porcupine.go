package history

import (
	"time"

	"github.com/anishathalye/porcupine"
)

// Linearizable checks ops against m for up to timeout. An illegal history
// is a violation; if htmlPath is set, porcupine's visualization of it is
// written there (and named in the message). Unknown (the search timed
// out) is returned as such, with no violation: the caller decides.
func Linearizable(what string, m porcupine.Model, ops []porcupine.Operation, timeout time.Duration, htmlPath string) (porcupine.CheckResult, []Violation) {
	res, info := porcupine.CheckOperationsVerbose(m, ops, timeout)
	if res != porcupine.Illegal {
		return res, nil
	}
	msg := what + ": the history is NOT linearizable"
	if htmlPath != "" {
		if err := porcupine.VisualizePath(m, info, htmlPath); err != nil {
			msg += " (visualization failed: " + err.Error() + ")"
		} else {
			msg += "; see " + htmlPath
		}
	}
	return res, []Violation{{Check: CheckLinearizable, Msg: msg}}
}
