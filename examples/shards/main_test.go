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

// The shards example under faults, with real processes: `leasehold serve`
// nodes, shards workers and a real Postgres.

var (
	workerBin    string
	leaseholdBin string
	pg           *pgtest.Server
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shards-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	built := make(chan error, 2)
	go func() { built <- procs.BuildPackage(filepath.Join(dir, "shards"), ".") }()
	var removeLeasehold func()
	go func() {
		var err error
		leaseholdBin, removeLeasehold, err = procs.Build("shards-leasehold-")
		built <- err
	}()
	var stop func()
	pg, stop = pgtest.StartMain()
	code := 1
	if err := errors.Join(<-built, <-built); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		workerBin = filepath.Join(dir, "shards")
		code = m.Run()
	}
	stop()
	if removeLeasehold != nil {
		removeLeasehold()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
