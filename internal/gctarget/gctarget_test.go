package gctarget

import (
	"context"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGOGCFollowsTheLiveHeap(t *testing.T) {
	for _, c := range []struct {
		live    uint64
		percent int
		want    int
	}{
		{0, 25, 100},
		{10 << 20, 25, 100},
		{16 << 20, 25, 100},
		{32 << 20, 25, 50},
		{64 << 20, 25, 25},
		{1 << 30, 25, 25},
		{1 << 30, 50, 50},
		{1 << 30, 100, 100},
	} {
		if got := GOGC(c.live, c.percent); got != c.want {
			t.Errorf("GOGC(%d MiB, %d) = %d, want %d", c.live>>20, c.percent, got, c.want)
		}
	}
}

func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// waitGOGC polls until GOGC satisfies ok, collecting so that the live
// heap is measured anew.
func waitGOGC(t *testing.T, what string, ok func(uint64) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(gogc()) {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is %d after 10s, want %s", gogc(), what)
		}
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
}

// With 48 MiB live, Run lowers GOGC to 33 (16 MiB of headroom, not 48);
// once the heap is small again it is back at 100, and when Run ends it
// puts back the GOGC it found.
func TestRunLowersGOGCForALargeHeap(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Run(ctx, Percent, 10*time.Millisecond)
		close(done)
	}()
	big := make([]byte, 48<<20)
	for i := range big {
		big[i] = 1 // touched, as live state is
	}
	waitGOGC(t, "at most 40 with 48 MiB live", func(p uint64) bool { return p <= 40 })
	runtime.KeepAlive(big)
	big = nil
	waitGOGC(t, "100 once the heap is small", func(p uint64) bool { return p == 100 })
	cancel()
	<-done
	if p := gogc(); p != 100 {
		t.Fatalf("GOGC is %d after Run ended, want the 100 it found", p)
	}
}
