package stripe

import (
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHintSpreadsStacks: stacks of any common size, side by side as the
// runtime hands them out, land on many lines, not on a few. Fibonacci
// hashing puts 16 of them on 16 of 64 lines for most sizes, and at worst
// (32 KB stacks, by block) on 10 or 11, where random picks give 12 to 16.
func TestHintSpreadsStacks(t *testing.T) {
	const base = 0xc000200000 // where Go's heap, and so its stacks, start on amd64
	for _, size := range []uintptr{2 << 10, 8 << 10, 32 << 10, 1 << 20} {
		seen, blocks := map[uint]bool{}, map[uint]bool{}
		for i := range uintptr(16) {
			h := hint(base+i*size+size-200, counterBits)
			require.Less(t, h, uint(counterLines))
			seen[h] = true
			blocks[hint((base+i*size+size-200)>>11, counterBits)] = true // as Lines.Get
		}
		assert.GreaterOrEqual(t, len(seen), 10, "16 stacks of %d B apart share too few of %d lines", size, counterLines)
		assert.GreaterOrEqual(t, len(blocks), 10, "16 stacks of %d B apart share too few of %d lines by block", size, counterLines)
	}
}

func TestCounterSumsConcurrentAdds(t *testing.T) {
	var c Counter
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 1000 {
				c.Add(1)
			}
		})
	}
	c.Add(-5)
	wg.Wait()
	assert.Equal(t, int64(16*1000-5), c.Load())
}

// TestCounterLinesApart: two lines' values are a cache-line pair apart.
func TestCounterLinesApart(t *testing.T) {
	var c Counter
	d := uintptr(unsafe.Pointer(&c.lines[1].n)) - uintptr(unsafe.Pointer(&c.lines[0].n))
	assert.Equal(t, uintptr(lineBytes), d)
}

type pair struct{ a, b atomic.Int64 }

func TestLinesZeroValueIsReady(t *testing.T) {
	var l Lines[pair]
	n := 0
	for range l.All() {
		n++
	}
	assert.Zero(t, n, "nothing to read before the first Get")
	l.Get().a.Add(3)
	for p := range l.All() {
		n++
		assert.True(t, p.a.Load() == 0 || p.a.Load() == 3)
	}
	assert.Equal(t, 1<<bitsFor(), n)
}

func TestLinesSumsConcurrentAdds(t *testing.T) {
	var l Lines[pair]
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 1000 {
				p := l.Get()
				p.a.Add(1)
				p.b.Add(2)
			}
		})
	}
	wg.Wait()
	var a, b int64
	for p := range l.All() {
		a += p.a.Load()
		b += p.b.Load()
	}
	assert.Equal(t, int64(16000), a)
	assert.Equal(t, int64(32000), b)
}

// TestLinesStripesApart: a stripe's fields are a cache-line pair away
// from the next stripe's, whatever T's size.
func TestLinesStripesApart(t *testing.T) {
	var small Lines[atomic.Int64]
	small.Get()
	var big Lines[[40]atomic.Int64]
	big.Get()
	var smalls, bigs []uintptr
	for p := range small.All() {
		smalls = append(smalls, uintptr(unsafe.Pointer(p)))
	}
	for p := range big.All() {
		bigs = append(bigs, uintptr(unsafe.Pointer(p)))
	}
	assert.GreaterOrEqual(t, smalls[1]-smalls[0], uintptr(8+lineBytes))
	assert.GreaterOrEqual(t, bigs[1]-bigs[0], uintptr(40*8+lineBytes))
}

func TestAllStopsWhenAsked(t *testing.T) {
	var l Lines[pair]
	l.Get()
	n := 0
	for range l.All() {
		n++
		break
	}
	assert.Equal(t, 1, n)
}
