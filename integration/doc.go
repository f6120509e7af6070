// Package integration is the integration suite: real in-process clusters
// (started by internal/testcluster) driven through the Go client and the
// API — failover, partitions, quorum loss, membership, snapshots,
// forwarding, TLS, damaged logs, a full disk, and a history check of the
// fencing tokens. The suite with real processes and signals is faults/;
// the CLI's end-to-end tests are in cmd/leasehold.
package integration
