package bench

import (
	"math"
	"math/bits"
	"time"
)

// Hist is a log-linear latency histogram in the manner of HdrHistogram:
// values below 2^subBits nanoseconds are kept exactly, larger ones in
// buckets 1/2^subBits of their power of two wide, so every quantile is within
// 0.8% of the true sample. Its memory is fixed (about 58 KiB once a value is
// recorded) however many samples it holds. Count, sum, min and max are
// exact. A Hist is not safe for concurrent use: give each worker its own and
// Merge them.
type Hist struct {
	counts []uint64
	n      uint64
	sum    uint64 // nanoseconds; overflows only past 584 years of samples
	min    int64
	max    int64
}

const (
	subBits  = 7
	subCount = 1 << subBits
	nBuckets = (64 - subBits) * subCount // enough for every non-negative int64
)

func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	e := bits.Len64(v) - subBits - 1 // v>>e is in [subCount, 2*subCount)
	return (e+1)<<subBits + int(v>>e) - subCount
}

// bucketRange is the smallest and largest value that fall into bucket i.
func bucketRange(i int) (lo, hi uint64) {
	if i < subCount {
		return uint64(i), uint64(i)
	}
	e := i>>subBits - 1
	m := uint64(i&(subCount-1) + subCount)
	return m << e, (m+1)<<e - 1
}

// Record adds one sample; negative durations count as zero.
func (h *Hist) Record(d time.Duration) {
	v := max(int64(d), 0)
	if h.counts == nil {
		h.counts = make([]uint64, nBuckets)
	}
	h.counts[bucketOf(uint64(v))]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += uint64(v)
}

// Merge adds every sample of o to h.
func (h *Hist) Merge(o *Hist) {
	if o == nil || o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, nBuckets)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Count is the number of samples.
func (h *Hist) Count() int64 { return int64(h.n) }

// Mean is the exact mean of the samples (0 if none).
func (h *Hist) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / h.n)
}

// Min is the smallest sample (0 if none).
func (h *Hist) Min() time.Duration { return time.Duration(h.min) }

// Max is the largest sample (0 if none).
func (h *Hist) Max() time.Duration { return time.Duration(h.max) }

// Quantile returns the nearest-rank q-quantile (0 <= q <= 1): the sample at
// rank ceil(q*n), reported as the top of its bucket (so never below the true
// sample, and never above the true maximum). Quantile(0) is the minimum and
// Quantile(1) the maximum, both exact.
func (h *Hist) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return time.Duration(h.min)
	}
	if q >= 1 {
		return time.Duration(h.max)
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			_, hi := bucketRange(i)
			v := min(int64(hi), h.max)
			return time.Duration(max(v, h.min))
		}
	}
	return time.Duration(h.max)
}

// Bucket is one non-empty histogram bucket: samples in [Lo, Hi].
type Bucket struct {
	Lo, Hi time.Duration
	Count  uint64
}

// Buckets lists the non-empty buckets in increasing order.
func (h *Hist) Buckets() []Bucket {
	var out []Bucket
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		lo, hi := bucketRange(i)
		out = append(out, Bucket{Lo: time.Duration(lo), Hi: time.Duration(hi), Count: c})
	}
	return out
}
