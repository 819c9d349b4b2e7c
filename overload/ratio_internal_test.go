package overload

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countRetries asks for retries until one is refused, and counts the
// allowed, up to 1,000,000.
func countRetries(b *Ratio) int {
	n := 0
	for n < 1_000_000 && b.Retry(0) == nil {
		n++
	}
	return n
}

// TestRatio_clockBefore1970DoesNotPanic: the ring is indexed by the Unix
// second modulo the window, and Go's % is negative for a negative second:
// a clock before 1970 (time.Time{}, a mock set back) must not make Retry
// panic inside Do.
func TestRatio_clockBefore1970DoesNotPanic(t *testing.T) {
	for _, at := range []time.Time{{}, time.Unix(-3600, 0)} {
		mock := clock.NewMock()
		mock.Set(at)
		b, err := NewRatio(RatioOptions{Ratio: 1, MinPerSecond: None, Clock: mock})
		require.NoError(t, err)
		for range 3 {
			b.Attempted(1, false, false)
		}
		var n int
		require.NotPanics(t, func() { n = countRetries(b) }, "at %v", at)
		assert.Equal(t, 3, n)
		mock.Add(time.Hour) // the window has moved past every call
		require.NotPanics(t, func() { n = countRetries(b) })
		assert.Zero(t, n)
	}
}

// TestRatio_longQuietSpellDoesNotOverflow: advance spreads the calls
// counted since the window last moved with added*(t-last)/spread, which
// overflows int64 once calls × seconds pass 9.2e18: 100,000 calls a
// second for 120 days without a retry asked for. The window's last 10 s
// then hold about 1,000,000 calls, so about 100,000 retries plus the
// reserve are allowed.
func TestRatio_longQuietSpellDoesNotOverflow(t *testing.T) {
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b, err := NewRatio(RatioOptions{Clock: mock})
	require.NoError(t, err)
	const rate, quiet = 100_000, 120 * 24 * 3600
	b.calls.Add(rate * quiet) // as Attempted would have counted them
	mock.Add(quiet * time.Second)
	assert.InDelta(t, 0.1*rate*10+2*10, countRetries(b), 2)
}

// TestRatio_callsReadBeforeTheLockDoNotGoBack: allow reads the calls
// before it takes the mutex, so a Retry that read them, then waited for
// the lock while another moved the window with a later count, set
// lastCalls back: the calls in between were counted again in the next
// second. Window 1 s, ratio 1, no reserve: 100 calls in second 0, none
// in second 1, so second 1 allows no retry.
func TestRatio_callsReadBeforeTheLockDoNotGoBack(t *testing.T) {
	mock := clock.NewMock()
	b, err := NewRatio(RatioOptions{Ratio: 1, MinPerSecond: None, Window: time.Second, Clock: mock})
	require.NoError(t, err)
	b.mu.Lock()
	done := make(chan error)
	go func() { done <- b.Retry(0) }() // reads 0 calls, then waits for the lock
	waitForLock(t, "(*Ratio).allow")
	for range 100 {
		b.Attempted(1, false, false)
	}
	// Another Retry of second 0, which read the 100 calls, moves the
	// window first (as allow does under the lock).
	b.advance(mock.Now().Unix(), b.calls.Load())
	b.mu.Unlock()
	<-done // refused or not: it decided on 0 calls

	mock.Add(time.Second)
	assert.Zero(t, countRetries(b), "second 1 had no call")
}

// waitForLock waits until a goroutine in fn is blocked on a mutex.
func waitForLock(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for range 10_000 {
		st := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(st, "\n\n") {
			if strings.Contains(g, fn) && strings.Contains(g, "sync.(*Mutex).Lock") {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no goroutine blocked on the mutex in %s", fn)
}
