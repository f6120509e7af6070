package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/procs"
)

// The orders consumer under faults, with real consumer processes, real
// `leasehold serve` processes and a real Postgres: whatever happens to a
// consumer or to the leader, every acknowledged send is applied, once, in
// its order's send order.

var (
	ordersBin    string
	leaseholdBin string
	pg           *pgtest.Server
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "orders-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	built := make(chan error, 1)
	go func() { built <- procs.BuildPackage(filepath.Join(dir, "orders"), ".") }()
	lh, remove, lerr := procs.Build("orders-leasehold-")
	var stop func()
	pg, stop = pgtest.StartMain()
	code := 1
	if err := errors.Join(<-built, lerr); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		ordersBin, leaseholdBin = filepath.Join(dir, "orders"), lh
		code = m.Run()
	}
	stop()
	if remove != nil {
		remove()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
