package faults

import (
	"cmp"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestConcurrentAcquisitions runs client processes that acquire one
// resource again and again at the same time, each holding it for a moment
// (50ms) and releasing it: on the machine's monotonic clock, which every
// process reads, no two holdings overlap, and in the order they happened
// each holder's token is above the one before.
func TestConcurrentAcquisitions(t *testing.T) {
	n := startOne(t)
	c := newClient(t, "", n.url)
	h := &history{}
	const r = "list/contended"
	procs, each := 4, rounds(5, 25)
	var cps []*clientProc
	for range procs {
		cps = append(cps, startClientProc(t, r, []string{n.url}, clientOpts{TTL: 10 * time.Second, Wait: time.Minute, Work: "contend", Rounds: each}))
	}
	for i, cp := range cps { // all started: go at once
		if err := cp.waitOutput(progressTimeout, "got ready", func(o clientOutput) bool { return o.count("ready") > 0 }); err != nil {
			t.Fatalf("client process %d: %v", i, err)
		}
	}
	for _, cp := range cps {
		if err := cp.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
	}
	type holding struct {
		proc               int
		lease, token       uint64
		asked, from, until uint64 // CLOCK_MONOTONIC: acquire sent, granted, release begun
	}
	var all []holding
	for i, cp := range cps {
		if !cp.Wait(progressTimeout + time.Minute) {
			t.Fatalf("client process %d did not finish its %d acquisitions: %s", i, each, lastLines(cp.Stderr(), 4))
		}
		if cp.Code() != 0 {
			t.Fatalf("client process %d failed: %s", i, lastLines(cp.Stderr(), 4))
		}
		o := cp.output()
		var cur *holding
		var asked uint64
		for _, e := range o.events {
			switch e.kind {
			case "grant":
				var hd holding
				fmt.Sscan(e.args[0], &hd.lease)
				fmt.Sscan(e.args[1], &hd.token)
				hd.proc, hd.asked, hd.from = i, asked, uint64(e.mono)
				all = append(all, hd)
				cur = &all[len(all)-1]
			case "acquire":
				asked = uint64(e.mono)
			case "release":
				cur.until = uint64(e.mono)
			case "released":
				if e.args[0] != "ok" {
					t.Errorf("client process %d: a release answered %s", i, e.args[0])
				}
			}
		}
	}
	if len(all) != procs*each {
		t.Fatalf("%d holdings, want %d", len(all), procs*each)
	}
	slices.SortFunc(all, func(a, b holding) int { return cmp.Compare(a.from, b.from) })
	for _, hd := range all {
		h.granted(r, hd.lease, hd.token) // in the order they happened
	}
	for i := 1; i < len(all); i++ {
		prev, cur := all[i-1], all[i]
		if cur.from < prev.until {
			t.Errorf("process %d held %s from %d while process %d held it until %d (%v at once)",
				cur.proc, r, cur.from, prev.proc, prev.until, time.Duration(prev.until-cur.from))
		}
		if cur.token <= prev.token {
			t.Errorf("process %d's token %d follows process %d's %d", cur.proc, cur.token, prev.proc, prev.token)
		}
	}
	// The processes did contend: most acquires waited while another
	// process's holding began.
	waited := 0
	for _, a := range all {
		for _, b := range all {
			if b.proc != a.proc && a.asked < b.from && b.from < a.from {
				waited++
				break
			}
		}
	}
	if waited < len(all)/2 {
		t.Errorf("only %d of %d acquires waited for another process's holding: the test did not contend", waited, len(all))
	}
	t.Logf("%d of %d acquires waited for another process's holding", waited, len(all))
	finish(t, "concurrent-acquisitions", h, c, expect{}, nil)
}
