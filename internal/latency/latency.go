// Package latency keeps a window of the latest latencies and their
// percentile, the adaptive hedge delay of retry.WithHedge.
package latency

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Window keeps the latest first attempts' latencies in a ring and, every
// eighth of it, works out their percentile as the hedge delay. Safe for
// concurrent use: recording is two atomic operations, and the one
// goroutine that crosses an eighth's end computes the delay under mu
// (another that finds mu held skips it).
type Window struct {
	ring     []atomic.Int64
	n        atomic.Uint64 // latencies recorded
	delay    atomic.Int64  // the current delay; 0 before warm-up
	every    uint64        // recompute after this many
	warm     uint64        // latencies needed before the first delay
	p        float64
	minDelay time.Duration

	mu      sync.Mutex
	scratch []int64
}

// New returns a Window of the latest window latencies whose delay is
// their p-th percentile (0 < p < 1), at least minDelay, known once a tenth
// of the window (at least 10) was recorded.
func New(window int, p float64, minDelay time.Duration) *Window {
	l := &Window{
		ring: make([]atomic.Int64, window), every: uint64(max(window/8, 1)),
		warm: uint64(max(window/10, 10)), p: p, minDelay: minDelay,
		scratch: make([]int64, 0, window),
	}
	for i := range l.ring {
		l.ring[i].Store(-1) // counted in n but not yet stored: recompute skips it
	}
	return l
}

// Record adds a latency to the window.
func (l *Window) Record(d time.Duration) {
	i := l.n.Add(1)
	l.ring[(i-1)%uint64(len(l.ring))].Store(int64(d))
	if i >= l.warm && (i == l.warm || i%l.every == 0) {
		l.recompute(i)
	}
}

// recompute sets the delay to the p-th percentile of the latest n (at
// most a window of) latencies, at least minDelay.
func (l *Window) recompute(n uint64) {
	if !l.mu.TryLock() {
		return
	}
	defer l.mu.Unlock()
	s := l.scratch[:0]
	for i := range min(n, uint64(len(l.ring))) {
		if d := l.ring[i].Load(); d >= 0 {
			s = append(s, d)
		}
	}
	if len(s) == 0 {
		return
	}
	k := int(math.Ceil(l.p*float64(len(s)))) - 1
	d := time.Duration(nth(s, max(k, 0)))
	l.delay.Store(int64(max(d, l.minDelay)))
}

// nth returns the k-th smallest of s, reordering s: Hoare's selection, in
// linear time on average, where sorting a window every eighth of it would
// cost its log more.
func nth(s []int64, k int) int64 {
	lo, hi := 0, len(s)-1
	for lo < hi {
		pivot := s[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for s[i] < pivot {
				i++
			}
			for s[j] > pivot {
				j--
			}
			if i <= j {
				s[i], s[j] = s[j], s[i]
				i, j = i+1, j-1
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return s[k]
		}
	}
	return s[k]
}

// Delay is the current delay: 0 until the window has warmed up.
func (l *Window) Delay() time.Duration { return time.Duration(l.delay.Load()) }
