package service

import "github.com/leasehold/leasehold/fsm"

// The commands the service takes and the results it gives are the state
// machine's own plain values, named here so that the API front needs
// nothing from fsm: a request is checked and built once, at the edge, and
// proposed as it is.
type (
	Acquire      = fsm.Acquire
	Renew        = fsm.Renew
	Release      = fsm.Release
	ForceRelease = fsm.ForceRelease
	Put          = fsm.Put
	Delete       = fsm.Delete
	Campaign     = fsm.Campaign
	Proclaim     = fsm.Proclaim
	// Command is one of the above, for Batch.
	Command = fsm.Command
	// Result is what the state machine answered a command.
	Result = fsm.Result
)

// MaxReasonLen bounds a forced release's reason.
const MaxReasonLen = fsm.MaxReasonLen

// MaxElectionValue bounds a leader's value.
const MaxElectionValue = fsm.MaxElectionValue
