package fsm

// Inventory counts what a state holds, for `leasehold snapshot inspect`.
type Inventory struct {
	LastIndex, LastToken uint64
	Leases, Waiters      int
	LockDelays           int
	Keys                 int
	Elections            int
	Semaphores           int
	IdemKeys             int
	Queues               int
	AuditRecords         int
	DedupRecords         int
}

func (s *State) Inventory() Inventory {
	return Inventory{LastIndex: s.lastIndex, LastToken: s.lastToken, Leases: len(s.leases), Waiters: len(s.waiters),
		LockDelays: len(s.blocks), Keys: len(s.kv), Elections: len(s.Elections("")), Semaphores: len(s.sems),
		IdemKeys: len(s.idem), Queues: len(s.queuesByName), AuditRecords: len(s.audit), DedupRecords: s.dedup.len()}
}
