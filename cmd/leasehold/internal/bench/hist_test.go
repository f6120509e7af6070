package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistExactSmallValues(t *testing.T) {
	var h Hist
	for v := 100; v >= 1; v-- { // order must not matter
		h.Record(time.Duration(v))
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.01, 1}, {0.5, 50}, {0.9, 90}, {0.99, 99}, {0.999, 100}, {1, 100}} {
		if got := h.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if h.Count() != 100 || h.Min() != 1 || h.Max() != 100 || h.Mean() != 50 {
		t.Errorf("count %d min %v max %v mean %v; want 100 1 100 50", h.Count(), h.Min(), h.Max(), h.Mean())
	}
}

func TestHistQuantilesWithinPrecision(t *testing.T) {
	var h Hist
	var all []time.Duration
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 1; i <= 10000; i++ {
		// 1µs..10ms, shuffled, plus a log-normal-ish tail.
		all = append(all, time.Duration(i)*time.Microsecond)
		all = append(all, time.Duration(math.Exp(rng.Float64()*20)))
	}
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	for _, v := range all {
		h.Record(v)
	}
	sorted := slices.Clone(all)
	slices.Sort(sorted)
	for _, q := range []float64{0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999} {
		rank := int(math.Ceil(q * float64(len(sorted))))
		exact := sorted[rank-1]
		got := h.Quantile(q)
		// Reported as the top of the sample's bucket: never below it, and
		// at most 1/128 above.
		if got < exact || float64(got-exact) > float64(exact)/subCount+1 {
			t.Errorf("Quantile(%v) = %v, exact %v", q, got, exact)
		}
	}
	if h.Max() != sorted[len(sorted)-1] || h.Min() != sorted[0] {
		t.Errorf("min/max %v/%v, want %v/%v", h.Min(), h.Max(), sorted[0], sorted[len(sorted)-1])
	}
	var sum time.Duration
	for _, v := range all {
		sum += v
	}
	if want := sum / time.Duration(len(all)); h.Mean() != want {
		t.Errorf("mean %v, want %v", h.Mean(), want)
	}
}

func TestHistBuckets(t *testing.T) {
	prev := -1
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 257, 1000, 1 << 20, 1<<20 + 12345, 1<<40 - 1, 1 << 62, math.MaxInt64} {
		i := bucketOf(v)
		lo, hi := bucketRange(i)
		if v < lo || v > hi {
			t.Errorf("value %d in bucket %d [%d, %d]", v, i, lo, hi)
		}
		if i < prev || i >= nBuckets {
			t.Errorf("bucket %d of %d out of order or range", i, v)
		}
		prev = i
		if i > 0 {
			_, phi := bucketRange(i - 1)
			if phi+1 != lo {
				t.Errorf("gap between bucket %d (to %d) and %d (from %d)", i-1, phi, i, lo)
			}
		}
	}
}

func TestHistMergeAndEmpty(t *testing.T) {
	var empty Hist
	if empty.Quantile(0.5) != 0 || empty.Mean() != 0 || empty.Max() != 0 || empty.Count() != 0 || len(empty.Buckets()) != 0 {
		t.Error("empty histogram reports samples")
	}
	var a, b, both Hist
	for i := range 1000 {
		d := time.Duration(i*i) * time.Microsecond
		both.Record(d)
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	a.Merge(&b)
	a.Merge(&empty)
	a.Merge(nil)
	for _, q := range []float64{0, 0.3, 0.5, 0.99, 1} {
		if a.Quantile(q) != both.Quantile(q) {
			t.Errorf("merged Quantile(%v) = %v, want %v", q, a.Quantile(q), both.Quantile(q))
		}
	}
	if a.Count() != both.Count() || a.Mean() != both.Mean() || a.Min() != both.Min() || a.Max() != both.Max() {
		t.Error("merged summary differs")
	}
	var n uint64
	for _, bk := range a.Buckets() {
		n += bk.Count
	}
	if n != 1000 {
		t.Errorf("buckets hold %d samples, want 1000", n)
	}
	var neg Hist
	neg.Record(-time.Second)
	if neg.Max() != 0 || neg.Count() != 1 {
		t.Error("a negative sample is not recorded as zero")
	}
}

func BenchmarkHistRecord(b *testing.B) {
	var h Hist
	for i := 0; b.Loop(); i++ {
		h.Record(time.Duration(i&0xfffff) * 100)
	}
}
