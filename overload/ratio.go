package overload

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/steadfast-go/retry/internal/isnil"
)

// RatioOptions configures a [Ratio] budget. The zero value gives the
// defaults.
type RatioOptions struct {
	// Ratio is the fraction of calls that may be retried within Window,
	// in (0, 10]. Default: 0.1, the SRE book's 10 %.
	Ratio float64
	// Window is how far back calls and retries are counted, a whole number
	// of seconds in [1s, 60s]. Default: 10s, as Finagle and Linkerd use.
	Window time.Duration
	// MinPerSecond is a reserve of retries per second allowed whatever the
	// ratio, so that a client with little traffic can still retry; it must
	// not be negative. It adds at most MinPerSecond/calls-per-second to
	// the load during an outage. Default: 2 (1 % at 200 calls/s).
	MinPerSecond float64
	// MaxWaiting bounds how many calls sharing the budget may wait between
	// attempts at once, as [TokenBucketOptions.MaxWaiting] does. Default:
	// no bound.
	MaxWaiting int
	// Clock measures the window, such as a *clock.Mock in tests. Default
	// (nil): real time. A nil pointer in the interface, such as
	// (*clock.Mock)(nil), is refused: it cannot tell the time.
	Clock clock.Clock
}

// Ratio is a retry budget in the manner of the SRE book's per-client
// retry ratio and Finagle's RetryBudget: over the last Window, retries may
// be at most Ratio times the calls made, plus MinPerSecond per second of
// the window. A denied retry is refused at once, never delayed. A call's
// first attempt is never refused, and is what the ratio counts.
//
// A call's first attempt costs one atomic add and takes no lock; the
// window is kept up to date only when a retry is asked for, under a
// mutex. When no retry was asked for in a whole window, the calls of that
// window are not known and count as none: only the reserve is allowed
// until new calls are counted.
//
// Build one with [NewRatio]. The zero Ratio is not usable, but it does
// not panic: it refuses every retry, with an error that matches
// [ErrBudgetExhausted] and says that a Ratio must be made with NewRatio.
// A Ratio is safe for concurrent use and is meant to be shared by all the
// calls to one downstream.
type Ratio struct {
	calls   atomic.Int64 // calls made, ever
	ratio   float64
	reserve float64 // retries the reserve allows over a whole window
	clock   clock.Clock
	wait    waitLimit

	mu      sync.Mutex
	slots   []ratioSlot // one per second of the window, a ring
	last    int64       // the second of the newest slot
	started bool
}

// ratioSlot is one second of the window.
type ratioSlot struct {
	callsBefore int64 // calls counted before the second began (as first seen)
	retries     int64 // retries allowed in it
}

// NewRatio returns an empty Ratio budget. Invalid options give an error
// that names the problem.
func NewRatio(o RatioOptions) (*Ratio, error) {
	if o.Ratio == 0 {
		o.Ratio = 0.1
	}
	if o.Window == 0 {
		o.Window = 10 * time.Second
	}
	if o.MinPerSecond == 0 {
		o.MinPerSecond = 2
	}
	if o.Clock == nil {
		o.Clock = clock.New()
	}
	switch {
	case isnil.Is(o.Clock):
		return nil, fmt.Errorf("overload: Clock (%T)(nil) is a nil pointer, which cannot tell the time (leave Clock nil for real time)", o.Clock)
	case !(o.Ratio > 0 && o.Ratio <= 10):
		return nil, fmt.Errorf("overload: Ratio %v is outside (0, 10]", o.Ratio)
	case o.Window < time.Second || o.Window > time.Minute || o.Window%time.Second != 0:
		return nil, fmt.Errorf("overload: Window %v is not a whole number of seconds in [1s, 60s]", o.Window)
	case o.MinPerSecond < 0 || math.IsNaN(o.MinPerSecond) || math.IsInf(o.MinPerSecond, 0):
		return nil, fmt.Errorf("overload: MinPerSecond %v must be a finite number, not negative", o.MinPerSecond)
	}
	n := int(o.Window / time.Second)
	b := &Ratio{ratio: o.Ratio, reserve: o.MinPerSecond * float64(n), clock: o.Clock, slots: make([]ratioSlot, n)}
	if err := b.wait.init(o.MaxWaiting); err != nil {
		return nil, err
	}
	return b, nil
}

// Attempted counts a call at its first attempt; later attempts and
// outcomes do not change a ratio budget.
func (b *Ratio) Attempted(attempt int, failed, throttled bool) {
	if attempt == 1 {
		b.calls.Add(1)
	}
}

// Retry allows a retry while the retries of the window stay within
// Ratio times its calls plus the reserve, and, with MaxWaiting, while
// fewer than MaxWaiting calls wait. The error of a refusal matches
// [ErrBudgetExhausted]. The zero Ratio refuses every retry.
func (b *Ratio) Retry(wait time.Duration) error {
	if b.clock == nil { // the zero Ratio: NewRatio always sets a clock
		return errRatioZero
	}
	if !b.allow(b.clock.Now()) {
		return errRatioSpent
	}
	if err := b.wait.enter(wait); err != nil {
		b.unspend()
		return err
	}
	return nil
}

// Waited gives back the waiting slot of a retry allowed by Retry.
func (b *Ratio) Waited() { b.wait.leave() }

// allow decides at now, and counts the retry if it is allowed. It is a
// function of the calls counted and of now alone.
func (b *Ratio) allow(now time.Time) bool {
	calls := b.calls.Load()
	b.mu.Lock()
	defer b.mu.Unlock()
	n := int64(len(b.slots))
	s := now.Unix()
	b.advance(s, calls)
	oldest := b.slots[(b.last+1)%n] // the window's first second
	var retries int64
	for i := range b.slots {
		retries += b.slots[i].retries
	}
	if float64(retries+1) > b.ratio*float64(calls-oldest.callsBefore)+b.reserve {
		return false
	}
	b.slots[b.last%n].retries++
	return true
}

// unspend takes back a retry that allow counted but the waiting limit
// refused.
func (b *Ratio) unspend() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if slot := &b.slots[b.last%int64(len(b.slots))]; slot.retries > 0 {
		slot.retries--
	}
}

// advance moves the ring on to second s, clearing the seconds that passed.
// A second starts with the calls counted so far: calls made while no retry
// was asked for are put in the earliest second they could belong to, so
// they leave the window as early as they could.
func (b *Ratio) advance(s, calls int64) {
	n := int64(len(b.slots))
	if !b.started || s-b.last >= n {
		for i := range b.slots {
			b.slots[i] = ratioSlot{callsBefore: calls}
		}
		b.started, b.last = true, s
		return
	}
	for t := b.last + 1; t <= s; t++ {
		b.slots[t%n] = ratioSlot{callsBefore: calls}
	}
	b.last = max(b.last, s) // a clock that went back stays in its second
}

var errRatioSpent = fmt.Errorf("%w: retries reached the budget's ratio of calls", ErrBudgetExhausted)

// errRatioZero refuses the retries of a zero Ratio, which has no window.
var errRatioZero = fmt.Errorf("overload: a Ratio must be made with NewRatio: the zero Ratio refuses every retry (%w)", ErrBudgetExhausted)
