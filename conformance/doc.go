// Package conformance holds the scenarios every leasehold client must pass
// (scenarios/*.json), a driver per client that runs them (drivers/go,
// drivers/typescript, drivers/python), and the suite that starts a real
// `leasehold serve` node and runs each driver against it (go test
// ./conformance). See README.md.
package conformance
