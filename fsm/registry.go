package fsm

// The table of commands: every kind this node knows, with its name and a
// constructor the log decoder fills. A new command is one row here plus its
// type (Kind, encode, decode, apply: the Command interface); the array
// index makes a kind registered twice a compile error.
var commands = [...]struct {
	name string
	new  func() Command
}{
	KindAcquire:      {"acquire", func() Command { return new(Acquire) }},
	KindRenew:        {"renew", func() Command { return new(Renew) }},
	KindRelease:      {"release", func() Command { return new(Release) }},
	KindExpire:       {"expire", func() Command { return new(Expire) }},
	KindCancel:       {"cancel", func() Command { return new(Cancel) }},
	KindWaitTimeout:  {"wait-timeout", func() Command { return new(WaitTimeout) }},
	KindUnblock:      {"unblock", func() Command { return new(Unblock) }},
	KindPut:          {"put", func() Command { return new(Put) }},
	KindDelete:       {"delete", func() Command { return new(Delete) }},
	KindForceRelease: {"force-release", func() Command { return new(ForceRelease) }},
	KindRaiseTokens:  {"raise-tokens", func() Command { return new(RaiseTokens) }},
	KindTxn:          {"txn", func() Command { return new(Txn) }},
	KindCampaign:     {"campaign", func() Command { return new(Campaign) }},
	KindProclaim:     {"proclaim", func() Command { return new(Proclaim) }},
	KindIdemBegin:    {"idem-begin", func() Command { return &IdemBegin{oldKind: true} }},
	KindIdemComplete: {"idem-complete", func() Command { return new(IdemComplete) }},
	KindIdemForget:   {"idem-forget", func() Command { return new(IdemForget) }},
	KindQueueCreate:  {"queue-create", func() Command { return new(QueueCreate) }},
	KindQueueSend:    {"queue-send", func() Command { return new(QueueSend) }},
	KindQueueReceive: {"queue-receive", func() Command { return new(QueueReceive) }},
	KindQueueAck:     {"queue-ack", func() Command { return new(QueueAck) }},
	KindQueueNack:    {"queue-nack", func() Command { return new(QueueNack) }},
	KindQueueExtend:  {"queue-extend", func() Command { return new(QueueExtend) }},
	KindQueueExpire:  {"queue-expire", func() Command { return new(QueueExpire) }},
	KindQueueRedrive: {"queue-redrive", func() Command { return new(QueueRedrive) }},
	KindQueuePurge:   {"queue-purge", func() Command { return new(QueuePurge) }},
	KindQueueDelete:  {"queue-delete", func() Command { return new(QueueDelete) }},
	KindQueueRetire:  {"queue-retire", func() Command { return new(QueueRetire) }},
	KindGroupCreate:  {"group-create", func() Command { return new(GroupCreate) }},
	KindGroupGrow:    {"group-grow", func() Command { return new(GroupGrow) }},
	KindGroupDelete:  {"group-delete", func() Command { return new(GroupDelete) }},
	KindGroupJoin:    {"group-join", func() Command { return &GroupJoin{oldKind: true} }},
	KindGroupLeave:   {"group-leave", func() Command { return new(GroupLeave) }},
	KindGroupRevoked: {"group-revoked", func() Command { return new(GroupRevoked) }},
	KindGroupLapse:   {"group-lapse", func() Command { return new(GroupLapse) }},
	KindSemAcquire:   {"sem-acquire", func() Command { return new(SemAcquire) }},

	KindQueueAckBy:     {"queue-ack-by", func() Command { return &QueueAck{Settler: bound} }},
	KindQueueNackBy:    {"queue-nack-by", func() Command { return &QueueNack{Settler: bound} }},
	KindQueueExtendBy:  {"queue-extend-by", func() Command { return &QueueExtend{Settler: bound} }},
	KindQueueReceiveID: {"queue-receive-id", func() Command { return new(QueueReceiveID) }},
	KindIdemAbandon:    {"idem-abandon", func() Command { return new(IdemAbandon) }},
	KindQueueCreateID:  {"queue-create-id", func() Command { return new(QueueCreateID) }},
	KindQueueNackID:    {"queue-nack-id", func() Command { return &QueueNackID{QueueNack{Settler: bound}} }},
	KindQueueRedriveID: {"queue-redrive-id", func() Command { return new(QueueRedriveID) }},
	KindQueuePurgeID:   {"queue-purge-id", func() Command { return new(QueuePurgeID) }},
	KindQueueDeleteID:  {"queue-delete-id", func() Command { return new(QueueDeleteID) }},

	KindGroupJoinNamed:    {"group-join-named", func() Command { return new(GroupJoin) }},
	KindIdemBeginNamed:    {"idem-begin-named", func() Command { return new(IdemBegin) }},
	KindForceReleaseNamed: {"force-release-named", func() Command { return &ForceRelease{named: true} }},

	KindBarrierCreate:    {"barrier-create", func() Command { return new(BarrierCreate) }},
	KindBarrierArrive:    {"barrier-arrive", func() Command { return new(BarrierArrive) }},
	KindBarrierCountDown: {"barrier-count-down", func() Command { return new(BarrierCountDown) }},
	KindBarrierReset:     {"barrier-reset", func() Command { return new(BarrierReset) }},
	KindBarrierDelete:    {"barrier-delete", func() Command { return new(BarrierDelete) }},
	KindBarrierTimeout:   {"barrier-timeout", func() Command { return new(BarrierTimeout) }},
}

// bound is how a bound queue settlement (kinds 70–72, 75) starts decoding.
var bound = Settler{Bound: true}

// newCommand returns an empty command of kind k, or nil if k is unknown.
func newCommand(k Kind) Command {
	if int(k) >= len(commands) || commands[k].new == nil {
		return nil
	}
	return commands[k].new()
}

// String is the kind's name, for messages.
func (k Kind) String() string {
	if int(k) < len(commands) && commands[k].name != "" {
		return commands[k].name
	}
	if k&Ignorable != 0 {
		return "unknown ignorable kind"
	}
	return "unknown kind"
}
