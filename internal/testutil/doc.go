// Package testutil holds the helpers every package's tests share: a
// context bounded by the test and a timeout, a polling wait bounded by a
// deadline, and loopback addresses. It imports nothing of ours but
// internal/freeport, so any package's tests can use it.
package testutil
