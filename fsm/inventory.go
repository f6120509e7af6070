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
	return Inventory{LastIndex: s.lastIndex, LastToken: s.lastToken, Leases: s.leases.byID.len(), Waiters: s.leases.waiters.len(),
		LockDelays: s.leases.blocks.len(), Keys: s.kv.items.len(), Elections: len(s.Elections("")), Semaphores: s.sems.byName.len(),
		IdemKeys: s.idem.records.len(), Queues: s.queues.byName.len(), AuditRecords: len(s.audit), DedupRecords: s.dedup.len()}
}
