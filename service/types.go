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
	Txn          = fsm.Txn
	Compare      = fsm.Compare
	CompareOp    = fsm.CompareOp
	TxnOp        = fsm.TxnOp
	TxnResult    = fsm.TxnResult
	LeaseProof   = fsm.LeaseProof
	// Item is a key's value, version and bound lease.
	Item = fsm.Item
	// KeyItem is an Item with its key, as ListKeys gives it.
	KeyItem  = fsm.KeyItem
	Campaign = fsm.Campaign
	// Ask is an acquire of any kind: a lock (Acquire), a Campaign or a
	// SemAcquire.
	Ask        = fsm.Ask
	SemAcquire = fsm.SemAcquire
	Proclaim   = fsm.Proclaim
	// Command is one of the above, for Batch.
	Command = fsm.Command
	// Result is what the state machine answered a command.
	Result = fsm.Result
)

// MaxReasonLen bounds a forced release's reason.
const MaxReasonLen = fsm.MaxReasonLen

// TxnLimits are the transaction limits every node applies (the state
// machine's defaults); the API edge checks them before proposing.
var TxnLimits = func() (l struct{ Compares, Ops, Bytes int }) {
	c := fsm.DefaultConfig()
	l.Compares, l.Ops, l.Bytes = c.MaxTxnCompares, c.MaxTxnOps, c.MaxTxnBytes
	return l
}()

// The compares a Txn can make.
const (
	CompareVersionEqual   = fsm.CompareVersionEqual
	CompareVersionGreater = fsm.CompareVersionGreater
	CompareVersionLess    = fsm.CompareVersionLess
	CompareValueEqual     = fsm.CompareValueEqual
	CompareExists         = fsm.CompareExists
	CompareAbsent         = fsm.CompareAbsent
)

// MaxElectionValue bounds a leader's value.
const MaxElectionValue = fsm.MaxElectionValue
