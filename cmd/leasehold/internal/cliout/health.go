package cliout

// Health is `leasehold health`'s output: the node's /readyz answer.
type Health struct {
	Endpoint string `json:"endpoint"`
	Ready    bool   `json:"ready"`
	// The leader the node follows (its node id and raft address), when ready.
	LeaderNodeID   string `json:"leader_node_id,omitempty"`
	LeaderRaftAddr string `json:"leader_raft_addr,omitempty"`
	// Message is the node's answer, or why it could not be asked.
	Message string `json:"message"`
}
