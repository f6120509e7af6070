package main

// runbookForceRelease is the runbook section force-release points to: what
// a forced release does and does not stop. A test in the module root checks
// that every runbook link named in this package is a real section.
const runbookForceRelease = "docs/runbook.md#force-release"
