package overload

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/steadfast-go/retry/internal/isnil"
)

// AdaptiveOptions configures an [Adaptive] limit. The zero value gives
// the defaults; Min == Max gives a fixed limit (a bulkhead).
type AdaptiveOptions struct {
	// Initial, Min and Max bound the limit: 1 <= Min <= Initial <= Max <=
	// 1<<20. Defaults: 20, 1 and 200, as failsafe-go's and Netflix's
	// limits start; a Min or Max alone moves Initial within them.
	Initial, Min, Max int
	// Backoff is what the limit is multiplied by after a window of
	// attempts of which more than FailedShare failed, in (0, 1). Default: 0.8.
	Backoff float64
	// FailedShare is the share of a window's attempts that must fail for
	// the window to say the downstream is overloaded, in (0, 1). Default:
	// 0.1. Raise it for a downstream that fails more than a tenth of its
	// attempts as a rule, overloaded or not: the limit would stay low.
	FailedShare float64
	// MaxLatency, if set, is the slowest an attempt may be and still
	// count as answered: a slower one counts as failed, however long the
	// downstream has been slow. It must be at least 1 ms; 0 leaves it off.
	MaxLatency time.Duration
	// MaxQueued is how many first attempts (not Sheddable ones) may wait
	// for a permit while the limit is full, Critical ones first; a
	// Critical attempt may take the place of the newest waiting one that
	// is not. Default: 0, none waits: a queue in the client adds latency
	// its callers did not ask for.
	MaxQueued int
	// QueueTimeout bounds how long an attempt waits in the queue, within
	// its call's deadline; at least 1 ms. Default: 100 ms.
	QueueTimeout time.Duration
	// Clock times the queue, such as a *clock.Mock in tests (the same as
	// the Retrier's). Default: the real clock.
	Clock clock.Clock
}

// Adaptive is a [Limit] that adapts after TCP's congestion control
// (AIMD), as a client sees a downstream's overload: in failures and
// timeouts, which a client can tell apart from its own load without
// measuring the downstream's latency when idle. Each window of as many
// ended attempts as the limit: when more than FailedShare of them failed
// (a tenth), the limit is multiplied by Backoff; otherwise, if at least
// half of it was in use, it grows by one. A downstream whose failures
// are not overload (a third of its attempts fail at random) keeps the
// limit low unless FailedShare is raised above its usual share. Retries, hedges and Sheddable attempts may use
// only nine tenths of it, so that first attempts are shed last. Build one
// with [NewAdaptive] (the zero Adaptive refuses every attempt); it is
// safe for concurrent use.
type Adaptive struct {
	// state packs the attempts in flight and the window's counts, so that
	// a release is one atomic add (see the masks below).
	state   atomic.Uint64
	limit   atomic.Int64
	refused atomic.Uint64
	queued  atomic.Int64
	o       AdaptiveOptions
	mu      sync.Mutex // the queue's
	waiters []*limitWaiter
}

// The fields of Adaptive.state: in flight in the low 20 bits, then the
// window's answered and failed attempts in 22 bits each.
const (
	inFlightBits = 20
	countBits    = 22
	inFlightMask = 1<<inFlightBits - 1
	answeredUnit = 1 << inFlightBits
	failedUnit   = 1 << (inFlightBits + countBits)
	countMask    = 1<<countBits - 1
	maxLimit     = inFlightMask
)

// limitWaiter is a first attempt waiting in the queue.
type limitWaiter struct {
	ready    chan bool // true: it holds a permit; false: it was put out
	critical bool
}

// NewAdaptive returns a limit at Initial. Invalid options give an error
// that names the problem.
func NewAdaptive(o AdaptiveOptions) (*Adaptive, error) {
	if o.Min == 0 {
		o.Min = 1
	}
	if o.Max == 0 {
		o.Max = max(200, o.Min)
	}
	if o.Initial == 0 {
		o.Initial = min(max(20, o.Min), o.Max)
	}
	if o.Backoff == 0 {
		o.Backoff = 0.8
	}
	if o.FailedShare == 0 {
		o.FailedShare = 0.1
	}
	if o.QueueTimeout == 0 {
		o.QueueTimeout = 100 * time.Millisecond
	}
	switch {
	case o.Min < 1 || o.Min > o.Initial || o.Initial > o.Max || o.Max > maxLimit:
		return nil, fmt.Errorf("overload: the limit's Min %d, Initial %d and Max %d must keep 1 <= Min <= Initial <= Max <= %d", o.Min, o.Initial, o.Max, maxLimit)
	case !(o.Backoff > 0 && o.Backoff < 1):
		return nil, fmt.Errorf("overload: the limit's Backoff %v must be in (0, 1)", o.Backoff)
	case !(o.FailedShare > 0 && o.FailedShare < 1):
		return nil, fmt.Errorf("overload: the limit's FailedShare %v must be in (0, 1)", o.FailedShare)
	case o.MaxLatency != 0 && o.MaxLatency < time.Millisecond:
		return nil, fmt.Errorf("overload: the limit's MaxLatency %v is below 1ms: is it in the unit you meant?", o.MaxLatency)
	case o.MaxQueued < 0 || o.MaxQueued > maxLimit:
		return nil, fmt.Errorf("overload: the limit's MaxQueued %d must be in [0, %d]", o.MaxQueued, maxLimit)
	case o.QueueTimeout < time.Millisecond:
		return nil, fmt.Errorf("overload: the limit's QueueTimeout %v is below 1ms: is it in the unit you meant?", o.QueueTimeout)
	case o.Clock != nil && isnil.Is(o.Clock):
		return nil, fmt.Errorf("overload: Clock (%T)(nil) is a nil pointer, which cannot tell the time (leave Clock nil for real time)", o.Clock)
	}
	if o.Clock == nil {
		o.Clock = clock.New()
	}
	l := &Adaptive{o: o}
	l.limit.Store(int64(o.Initial))
	return l, nil
}

// Acquire takes a permit for a if the limit has room for it, or queues a
// first attempt (see MaxQueued); it refuses with [ErrLimitExceeded].
func (l *Adaptive) Acquire(ctx context.Context, a Attempt) error {
	// One atomic add takes the permit; a refused one is given back. Nine
	// tenths of the limit are for every attempt; only a first attempt
	// that is not Sheddable may take the last tenth, and only then is
	// the context looked at.
	first := a.Kind == FirstAttempt
	if l.queued.Load() == 0 { // none waits: a newcomer may not pass them
		n, lim := int64(l.state.Add(1)&inFlightMask), l.limit.Load()
		if n <= lim-lim/10 || first && n <= lim && CriticalityOf(ctx) != Sheddable {
			return nil
		}
		l.state.Add(^uint64(0))
	}
	if !first || l.o.MaxQueued == 0 {
		l.refused.Add(1)
		return ErrLimitExceeded
	}
	switch CriticalityOf(ctx) {
	case Sheddable:
		l.refused.Add(1)
		return ErrLimitExceeded
	case Critical:
		return l.wait(ctx, true)
	}
	return l.wait(ctx, false)
}

// wait queues a first attempt until a released permit is handed to it.
func (l *Adaptive) wait(ctx context.Context, critical bool) error {
	l.mu.Lock()
	if l.queued.Load() == 0 && l.tryTake() {
		l.mu.Unlock()
		return nil
	}
	if len(l.waiters) >= l.o.MaxQueued && !(critical && l.putOutNewestLocked()) {
		l.mu.Unlock()
		l.refused.Add(1)
		return ErrLimitExceeded
	}
	// Armed before it can be seen queued (a test's clock may move then),
	// and only for an attempt that queues: a refusal arms none.
	timer := l.o.Clock.Timer(l.o.QueueTimeout)
	defer timer.Stop()
	w := &limitWaiter{ready: make(chan bool, 1), critical: critical}
	i := len(l.waiters)
	for critical && i > 0 && !l.waiters[i-1].critical {
		i--
	}
	l.waiters = append(l.waiters, nil)
	copy(l.waiters[i+1:], l.waiters[i:])
	l.waiters[i] = w
	l.queued.Add(1)
	// A release that ended after tryTake above, but looked at queued
	// before it counted w, handed its permit to no one: take the room.
	l.admitLocked()
	l.mu.Unlock()

	select {
	case ok := <-w.ready:
		return l.admitted(ok)
	case <-ctx.Done():
	case <-timer.C:
	}
	l.mu.Lock()
	removed := l.removeLocked(w)
	l.mu.Unlock()
	if !removed { // handed a permit, or put out, as it gave up
		return l.admitted(<-w.ready)
	}
	l.refused.Add(1)
	return ErrLimitExceeded
}

// admitted is what a waiter that was handed ok returns: nil for a
// permit, a counted refusal for being put out.
func (l *Adaptive) admitted(ok bool) error {
	if ok {
		return nil
	}
	l.refused.Add(1)
	return ErrLimitExceeded
}

// tryTake takes a permit if in flight is below the limit.
func (l *Adaptive) tryTake() bool {
	if int64(l.state.Add(1)&inFlightMask) <= l.limit.Load() {
		return true
	}
	l.state.Add(^uint64(0))
	return false
}

// admitLocked hands permits to the waiters at the head of the queue
// while the limit has room for them: room the limit grew by, or that a
// release left as a waiter was being queued. l.mu must be held.
func (l *Adaptive) admitLocked() {
	for len(l.waiters) > 0 && l.tryTake() {
		w := l.waiters[0]
		l.waiters = l.waiters[1:]
		l.queued.Add(-1)
		w.ready <- true
	}
}

// putOutNewestLocked refuses the newest waiter that is not Critical, to
// make room for a Critical one.
func (l *Adaptive) putOutNewestLocked() bool {
	for i := len(l.waiters) - 1; i >= 0; i-- {
		if w := l.waiters[i]; !w.critical {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			l.queued.Add(-1)
			w.ready <- false
			return true
		}
	}
	return false
}

func (l *Adaptive) removeLocked(w *limitWaiter) bool {
	for i, x := range l.waiters {
		if x == w {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			l.queued.Add(-1)
			return true
		}
	}
	return false
}

// Release gives back a's permit, to the first waiting attempt if one
// waits, and counts r in the window: MaxLatency turns a slow answer
// into a failure.
func (l *Adaptive) Release(r Result, latency time.Duration) {
	var unit uint64
	switch {
	case r == Failed, r == Answered && l.o.MaxLatency > 0 && latency > l.o.MaxLatency:
		unit = failedUnit
	case r == Answered:
		unit = answeredUnit
	}
	if l.queued.Load() > 0 && l.handOver() {
		unit++ // the permit stays in flight, with its new holder
	}
	s := l.state.Add(unit - 1)
	if unit > 1 && int64(s>>inFlightBits&countMask+s>>(inFlightBits+countBits)) >= l.limit.Load() {
		l.closeWindow()
	}
}

// handOver gives a released permit to the first waiter, if the limit has
// room for it.
func (l *Adaptive) handOver() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waiters) == 0 || int64(l.state.Load()&inFlightMask) > l.limit.Load() {
		return false
	}
	w := l.waiters[0]
	l.waiters = l.waiters[1:]
	l.queued.Add(-1)
	w.ready <- true
	return true
}

// closeWindow moves the limit on once per window: the release that fills
// it takes its counts away.
func (l *Adaptive) closeWindow() {
	for {
		s := l.state.Load()
		answered, failed := int64(s>>inFlightBits&countMask), int64(s>>(inFlightBits+countBits))
		lim := l.limit.Load()
		if answered+failed < lim {
			return // another release closed it
		}
		if !l.state.CompareAndSwap(s, s&inFlightMask) {
			continue
		}
		next := lim
		switch {
		case float64(failed) > l.o.FailedShare*float64(answered+failed):
			next = min(int64(math.Floor(float64(lim)*l.o.Backoff)), lim-1)
		case (int64(s&inFlightMask)+1)*2 >= lim: // the attempt that filled the window was in flight too
			next = lim + 1
		}
		next = min(max(next, int64(l.o.Min)), int64(l.o.Max))
		l.limit.Store(next)
		if next > lim && l.queued.Load() > 0 {
			// Releases hand over one permit each: the waiters take the
			// new room now, or the attempts in flight would stay where
			// they were when the queue formed.
			l.mu.Lock()
			l.admitLocked()
			l.mu.Unlock()
		}
		return
	}
}

// Timed reports whether Release needs the attempts' latency: with
// MaxLatency only.
func (l *Adaptive) Timed() bool { return l.o.MaxLatency > 0 }

// LimitStats is what an [Adaptive] limit says of itself now.
type LimitStats struct {
	Limit    int    // attempts it lets in flight
	InFlight int    // attempts holding a permit
	Queued   int    // first attempts waiting for one
	Refused  uint64 // attempts refused since it was built
}

// Stats returns the limit's figures, for metrics.
func (l *Adaptive) Stats() LimitStats {
	return LimitStats{
		Limit:    int(l.limit.Load()),
		InFlight: int(l.state.Load() & inFlightMask),
		Queued:   int(l.queued.Load()),
		Refused:  l.refused.Load(),
	}
}
