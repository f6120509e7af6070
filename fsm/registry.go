package fsm

// The table of commands: every kind this node knows, with its name, a
// constructor the log decoder fills, its body version and, for a kind whose answer the
// dedup window keeps beyond a Result's common fields, how a snapshot
// writes that answer. A new command is one row here plus its type (Kind,
// encode, decode, apply: the Command interface); the array index makes a
// kind registered twice a compile error.
var commands = [...]kindRow{
	KindAcquire:      cmd("acquire", func() Command { return new(Acquire) }),
	KindRenew:        cmd("renew", func() Command { return new(Renew) }),
	KindRelease:      cmd("release", func() Command { return new(Release) }),
	KindExpire:       cmd("expire", func() Command { return new(Expire) }),
	KindCancel:       cmd("cancel", func() Command { return new(Cancel) }),
	KindWaitTimeout:  cmd("wait-timeout", func() Command { return new(WaitTimeout) }),
	KindUnblock:      cmd("unblock", func() Command { return new(Unblock) }),
	KindPut:          cmd("put", func() Command { return new(Put) }),
	KindDelete:       cmd("delete", func() Command { return new(Delete) }),
	KindForceRelease: cmd("force-release", func() Command { return new(ForceRelease) }),
	KindRaiseTokens:  cmd("raise-tokens", func() Command { return new(RaiseTokens) }),
	KindTxn:          cmd("txn", func() Command { return new(Txn) }).answers(txnAnswer),
	KindCampaign:     cmd("campaign", func() Command { return new(Campaign) }),
	KindProclaim:     cmd("proclaim", func() Command { return new(Proclaim) }),
	KindIdemBegin:    cmd("idem-begin", func() Command { return &IdemBegin{oldKind: true} }),
	KindIdemComplete: cmd("idem-complete", func() Command { return new(IdemComplete) }),
	KindIdemForget:   cmd("idem-forget", func() Command { return new(IdemForget) }),
	KindQueueCreate:  cmd("queue-create", func() Command { return new(QueueCreate) }),
	KindQueueSend:    cmd("queue-send", func() Command { return new(QueueSend) }),
	KindQueueReceive: cmd("queue-receive", func() Command { return new(QueueReceive) }),
	KindQueueAck:     cmd("queue-ack", func() Command { return new(QueueAck) }),
	KindQueueNack:    cmd("queue-nack", func() Command { return new(QueueNack) }),
	KindQueueExtend:  cmd("queue-extend", func() Command { return new(QueueExtend) }),
	KindQueueExpire:  cmd("queue-expire", func() Command { return new(QueueExpire) }),
	KindQueueRedrive: cmd("queue-redrive", func() Command { return new(QueueRedrive) }),
	KindQueuePurge:   cmd("queue-purge", func() Command { return new(QueuePurge) }),
	KindQueueDelete:  cmd("queue-delete", func() Command { return new(QueueDelete) }),
	KindQueueRetire:  cmd("queue-retire", func() Command { return new(QueueRetire) }),
	KindGroupCreate:  cmd("group-create", func() Command { return new(GroupCreate) }),
	KindGroupGrow:    cmd("group-grow", func() Command { return new(GroupGrow) }),
	KindGroupDelete:  cmd("group-delete", func() Command { return new(GroupDelete) }),
	KindGroupJoin:    cmd("group-join", func() Command { return &GroupJoin{oldKind: true} }),
	KindGroupLeave:   cmd("group-leave", func() Command { return new(GroupLeave) }),
	KindGroupRevoked: cmd("group-revoked", func() Command { return new(GroupRevoked) }),
	KindGroupLapse:   cmd("group-lapse", func() Command { return new(GroupLapse) }),
	KindSemAcquire:   cmd("sem-acquire", func() Command { return new(SemAcquire) }),

	KindQueueAckBy:     cmd("queue-ack-by", func() Command { return &QueueAck{Settler: bound} }),
	KindQueueNackBy:    cmd("queue-nack-by", func() Command { return &QueueNack{Settler: bound} }),
	KindQueueExtendBy:  cmd("queue-extend-by", func() Command { return &QueueExtend{Settler: bound} }),
	KindQueueReceiveID: cmd("queue-receive-id", func() Command { return new(QueueReceiveID) }),
	KindIdemAbandon:    cmd("idem-abandon", func() Command { return new(IdemAbandon) }),
	KindQueueCreateID:  cmd("queue-create-id", func() Command { return new(QueueCreateID) }).answers(queueAnswer),
	KindQueueNackID:    cmd("queue-nack-id", func() Command { return &QueueNackID{QueueNack{Settler: bound}} }),
	KindQueueRedriveID: cmd("queue-redrive-id", func() Command { return new(QueueRedriveID) }).answers(queueAnswer),
	KindQueuePurgeID:   cmd("queue-purge-id", func() Command { return new(QueuePurgeID) }).answers(queueAnswer),
	KindQueueDeleteID:  cmd("queue-delete-id", func() Command { return new(QueueDeleteID) }),

	KindGroupJoinNamed:    cmd("group-join-named", func() Command { return new(GroupJoin) }),
	KindIdemBeginNamed:    cmd("idem-begin-named", func() Command { return new(IdemBegin) }),
	KindForceReleaseNamed: cmd("force-release-named", func() Command { return &ForceRelease{named: true} }),

	KindBarrierCreate:    cmd("barrier-create", func() Command { return new(BarrierCreate) }).versionInBody(),
	KindBarrierArrive:    cmd("barrier-arrive", func() Command { return new(BarrierArrive) }).versionInBody(),
	KindBarrierCountDown: cmd("barrier-count-down", func() Command { return new(BarrierCountDown) }).versionInBody(),
	KindBarrierReset:     cmd("barrier-reset", func() Command { return new(BarrierReset) }).versionInBody(),
	KindBarrierDelete:    cmd("barrier-delete", func() Command { return new(BarrierDelete) }).versionInBody(),
	KindBarrierTimeout:   cmd("barrier-timeout", func() Command { return new(BarrierTimeout) }).versionInBody(),
}

// kindRow is one row of the table of commands.
type kindRow struct {
	name string
	new  func() Command
	// version is the body version this node writes (1 unless raised with
	// bodyVersion) and the newest it reads. A field added to a command is a
	// new body version of its kind: raise the row's version, write the
	// field after the others, and read it only when decoder.version is at
	// least the new version; an older body decodes as before.
	version byte
	// inBody marks a kind whose bodies started with their body version
	// before batch version 3 started every kind's so (versionInBody): an
	// entry of batch version 2 holds it too, and is read as version 3's.
	inBody bool
	// answer, if set, writes and reads in a snapshot's dedup record what
	// the kind's answer holds beyond the common fields (dedup.go).
	answer *answerCodec
}

func cmd(name string, new func() Command) kindRow { return kindRow{name: name, new: new, version: 1} }

// bodyVersion sets the row's body version.
func (r kindRow) bodyVersion(v byte) kindRow {
	r.version = v
	return r
}

// versionInBody marks the row's kind as one whose bodies carried their
// body version in batch version 2 already (the barriers', kinds 90–95,
// which began with one).
func (r kindRow) versionInBody() kindRow {
	r.inBody = true
	return r
}

// answers sets the row's answer codec.
func (r kindRow) answers(a *answerCodec) kindRow {
	r.answer = a
	return r
}

// rowOf is k's row, or nil if k is unknown.
func rowOf(k Kind) *kindRow {
	if int(k) >= len(commands) || commands[k].new == nil {
		return nil
	}
	return &commands[k]
}

// bound is how a bound queue settlement (kinds 70–72, 75) starts decoding.
var bound = Settler{Bound: true}

// newCommand returns an empty command of kind k, or nil if k is unknown.
func newCommand(k Kind) Command {
	if r := rowOf(k); r != nil {
		return r.new()
	}
	return nil
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
