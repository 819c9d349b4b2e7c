package overload

import (
	"fmt"
	"math"
	"math/bits"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/steadfast-go/retry/internal/isnil"
	"github.com/steadfast-go/retry/internal/stripe"
)

// None, given to a field of [RatioOptions] whose zero means the default,
// sets it to zero: RatioOptions{MinPerSecond: None} has no reserve, and
// RatioOptions{Ratio: None, MinPerSecond: None} allows no retry at all
// (Finagle's empty budget).
const None = -1

// RatioOptions configures a [Ratio] budget. The zero value gives the
// defaults.
type RatioOptions struct {
	// Ratio is the fraction of calls that may be retried within Window,
	// in (0, 10], or [None] for none (only the reserve). Default: 0.1, the
	// SRE book's 10 %.
	Ratio float64
	// Window is how far back calls and retries are counted, a whole number
	// of seconds in [1s, 60s]. Default: 10s, as Finagle and Linkerd use.
	Window time.Duration
	// MinPerSecond is a reserve of retries per second allowed whatever the
	// ratio, so that a client with little traffic can still retry; it must
	// not be negative, or is [None] for no reserve. It adds at most
	// MinPerSecond/calls-per-second to the load during an outage.
	// Default: 2 (1 % at 200 calls/s).
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

// Ratio is a retry budget after the SRE book's per-client retry ratio and
// Finagle's RetryBudget: over the last Window, retries may be at most
// Ratio times the calls made (first attempts Do tells it of) plus
// MinPerSecond per second; a first attempt is never refused. Build one
// with [NewRatio] (the zero Ratio refuses every retry, matching
// [ErrBudgetExhausted]) and share it by all calls to one downstream; it
// is safe for concurrent use, and takes 8 KB.
type Ratio struct {
	// The calls made, ever, striped so that callers on many CPUs do
	// not contend for one cache line.
	calls   stripe.Counter
	ratio   float64
	reserve float64 // retries the reserve allows over a whole window
	clock   clock.Clock
	wait    waitLimit

	mu        sync.Mutex
	slots     []ratioSlot // one per second of the window, a ring
	last      int64       // the second of the newest slot
	lastCalls int64       // the calls counted when the window last moved
}

// ratioSlot is one second of the window.
type ratioSlot struct {
	callsBefore int64 // calls counted before the second began (as first seen)
	retries     int64 // retries allowed in it
}

// NewRatio returns an empty Ratio budget. Invalid options give an error
// that names the problem.
func NewRatio(o RatioOptions) (*Ratio, error) {
	switch o.Ratio {
	case 0:
		o.Ratio = 0.1
	case None:
		o.Ratio = 0
	default:
		if !(o.Ratio > 0 && o.Ratio <= 10) {
			return nil, fmt.Errorf("overload: Ratio %v is outside (0, 10]; use None for no ratio", o.Ratio)
		}
	}
	if o.Window == 0 {
		o.Window = 10 * time.Second
	}
	switch o.MinPerSecond {
	case 0:
		o.MinPerSecond = 2
	case None:
		o.MinPerSecond = 0
	}
	if o.Clock == nil {
		o.Clock = clock.New()
	}
	switch {
	case isnil.Is(o.Clock):
		return nil, fmt.Errorf("overload: Clock (%T)(nil) is a nil pointer, which cannot tell the time (leave Clock nil for real time)", o.Clock)
	case o.Window < time.Second || o.Window > time.Minute || o.Window%time.Second != 0:
		return nil, fmt.Errorf("overload: Window %v is not a whole number of seconds in [1s, 60s]", o.Window)
	case o.MinPerSecond < 0 || math.IsNaN(o.MinPerSecond) || math.IsInf(o.MinPerSecond, 0):
		return nil, fmt.Errorf("overload: MinPerSecond %v must be a finite number, not negative (None for no reserve)", o.MinPerSecond)
	}
	n := int(o.Window / time.Second)
	b := &Ratio{ratio: o.Ratio, reserve: o.MinPerSecond * float64(n), clock: o.Clock, slots: make([]ratioSlot, n),
		last: o.Clock.Now().Unix()}
	if err := b.wait.init(o.MaxWaiting); err != nil {
		return nil, err
	}
	return b, nil
}

// Attempted counts a call at its first attempt if it ended in success or
// a failure worth retrying (see overload.Budget), not a permanent answer or
// one the caller's context cut; later attempts change nothing.
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
// function of the calls counted and of now alone. The calls are read
// under the mutex, so that each holder reads at least what the one before
// it read and the window never counts calls back.
func (b *Ratio) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	calls := b.calls.Load()
	b.advance(now.Unix(), calls)
	oldest := b.slot(b.last + 1) // the window's first second
	var retries int64
	for i := range b.slots {
		retries += b.slots[i].retries
	}
	if float64(retries+1) > b.ratio*float64(calls-oldest.callsBefore)+b.reserve {
		return false
	}
	b.slot(b.last).retries++
	return true
}

// slot is the ring's slot of second s, which may be before 1970.
func (b *Ratio) slot(s int64) *ratioSlot {
	n := int64(len(b.slots))
	i := s % n
	if i < 0 {
		i += n
	}
	return &b.slots[i]
}

// unspend takes back a retry that allow counted but the waiting limit
// refused.
func (b *Ratio) unspend() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if slot := b.slot(b.last); slot.retries > 0 {
		slot.retries--
	}
}

// advance moves the ring on to second s, where calls have been counted:
// the calls counted since the window last moved are spread evenly over
// the seconds from then to s, as a steady load makes them (the clock is
// read only when a retry is asked for, not per call). A clock that went
// back stays in its second. calls is never below b.lastCalls (allow reads
// it under the mutex).
func (b *Ratio) advance(s, calls int64) {
	if s <= b.last {
		b.lastCalls = calls // made by now: in this second, or before
		return
	}
	n := int64(len(b.slots))
	spread := uint64(s - b.last + 1) // the seconds from the last move's to s
	added := uint64(calls - b.lastCalls)
	for t := max(b.last+1, s-n+1); t <= s; t++ {
		// added*(t-last)/spread in 128 bits: calls × seconds passes
		// int64 after a long spell without a retry asked for. The
		// quotient is at most added, since t-last < spread.
		hi, lo := bits.Mul64(added, uint64(t-b.last))
		q, _ := bits.Div64(hi, lo, spread)
		*b.slot(t) = ratioSlot{callsBefore: b.lastCalls + int64(q)}
	}
	b.last, b.lastCalls = s, calls
}

var errRatioSpent = fmt.Errorf("%w: retries reached the budget's ratio of calls", ErrBudgetExhausted)

// errRatioZero refuses the retries of a zero Ratio, which has no window.
var errRatioZero = fmt.Errorf("overload: a Ratio must be made with NewRatio: the zero Ratio refuses every retry (%w)", ErrBudgetExhausted)
