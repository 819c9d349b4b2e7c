// Package stripe spreads counters that every call writes over cache
// lines, so that calls on other CPUs mostly write other lines and the
// count scales with the cores. A goroutine picks its line from where its
// stack lies: goroutines running at once have stacks apart, so with
// several lines per CPU two of them rarely share one.
package stripe

import (
	"iter"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// lineBytes keeps two stripes' values in different cache lines, and out
// of the pair of lines a core's adjacent-line prefetcher fetches together.
const lineBytes = 128

// perCPU is how many stripes a Lines has per CPU, up to 1<<maxBits: two
// goroutines share one with a chance of 1 in 8 times the CPUs. Stacks
// are reused, at the same addresses from run to run, so a pair that
// shares a stripe keeps sharing it: the chance is a program's, not a
// call's.
const (
	perCPU  = 8
	maxBits = 8
)

// bitsFor is log2 of how many stripes a Lines built now has: a power of
// two, so that a hash's top bits pick one. The CPUs are the machine's,
// or GOMAXPROCS if more, so that a set built while GOMAXPROCS is low (in
// a test, say) does not stay small.
func bitsFor() uint {
	b := uint(0)
	for 1<<b < perCPU*max(runtime.GOMAXPROCS(0), runtime.NumCPU()) && b < maxBits {
		b++
	}
	return b
}

// hint picks one of 1<<bits lines for a stack address: the top bits of
// its Fibonacci hash, which differ for stacks apart whatever their
// alignment.
func hint(p uintptr, bits uint) uint {
	return uint(p * 0x9E3779B97F4A7C15 >> (64 - bits))
}

// Counter is an int64 that many goroutines add to at once. The zero
// Counter is ready; it is safe for concurrent use. It takes 8 KB: its
// fixed number of lines lets Add pick one with a constant shift, no
// length to load and no bounds to check.
type Counter struct {
	lines [counterLines]counterLine
}

// counterLines is 8 lines per CPU up to 8 CPUs, 4 up to 16. Load reads
// them all, but only those written since it last ran miss its cache.
const (
	counterBits  = 6
	counterLines = 1 << counterBits
)

// counterLine is one stripe of a Counter, alone in its lines.
type counterLine struct {
	n atomic.Int64
	_ [lineBytes - 8]byte
}

// Add adds n to the calling goroutine's stripe: one atomic add, inline.
func (c *Counter) Add(n int64) {
	var here byte
	c.lines[hint(uintptr(unsafe.Pointer(&here)), counterBits)].n.Add(n)
}

// Load returns the sum of the stripes. Adds that ended before it began
// are all in it.
func (c *Counter) Load() int64 {
	var sum int64
	for i := range c.lines {
		sum += c.lines[i].n.Load()
	}
	return sum
}

// Lines holds one T per stripe, built on first use, for a group of
// counters written together. The zero Lines is ready; it is safe for
// concurrent use if T's fields are atomics.
type Lines[T any] struct {
	set  atomic.Pointer[lineSet[T]]
	once sync.Once
}

// lineSet is a Lines' stripes: the stripe i is items[i*stride], the
// elements between them padding.
type lineSet[T any] struct {
	items  []T
	stride uint
	bits   uint // log2 of the number of stripes
}

// Get returns the calling goroutine's stripe.
func (l *Lines[T]) Get() *T {
	s := l.set.Load()
	if s == nil {
		s = l.build()
	}
	// By the stack's 2 KB block, not the frame: one goroutine's Gets at
	// other depths (an observer's OnAttemptStart and OnDone) mostly
	// pick the same stripe, and so meet another goroutine's on none.
	var here byte
	return &s.items[hint(uintptr(unsafe.Pointer(&here))>>11, s.bits)*s.stride]
}

// build makes the stripes once, for every goroutine that finds none.
func (l *Lines[T]) build() *lineSet[T] {
	l.once.Do(func() {
		size := uint(unsafe.Sizeof(*new(T)))
		stride := 1 + (lineBytes+size-1)/max(size, 1) // a line's worth of padding after each
		bits := bitsFor()
		l.set.Store(&lineSet[T]{items: make([]T, stride<<bits), stride: stride, bits: bits})
	})
	return l.set.Load()
}

// All yields every stripe, for a reader to sum a field over them. A
// reader that sums field A over all stripes, then field B, counts every
// add to B that a writer made before an add to A that it counted.
func (l *Lines[T]) All() iter.Seq[*T] {
	return func(yield func(*T) bool) {
		s := l.set.Load()
		if s == nil {
			return
		}
		for i := range uint(1) << s.bits {
			if !yield(&s.items[i*s.stride]) {
				return
			}
		}
	}
}
