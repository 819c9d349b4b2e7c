package retry

import (
	"context"
	"io"
	"sync"
	"time"
)

// A hedged attempt (WithHedge) is one turn of the loop: its first attempt
// runs fn on Do's goroutine, as any attempt does, with a timer armed for
// the hedge delay. If fn has not returned when it fires, the timer's
// goroutine starts the next attempt beside it, and arms the timer again,
// up to the attempts allowed. The first success wins; a failure that ends
// the call ends them all; a failure worth retrying lets the others run.
// A hedge runs its attempt's hooks itself, on its goroutine: the
// observer's start and end, the breaker's and the budget's word, its own
// attempt timeout. Do's goroutine, once its fn has returned, waits for
// the round to be decided (settle), and the loop goes on with its result.

// hedgeRound is a hedged attempt and the hedges it started. A hedge reads
// only what the loop leaves alone while the round runs, from a copy of
// the call: its cfg, ctx, start and prevWait.
type hedgeRound[T any] struct {
	c     call // a copy: Do's stays on its stack
	fn    func(context.Context) (T, error)
	base  context.Context // the attempts' parent: the call's, with its idempotency claim
	delay time.Duration

	mu       sync.Mutex
	timer    hedgeTimer
	next     int                        // the number of the next hedge's attempt
	cancels  []context.CancelCauseFunc  // the first attempt's, then each hedge's
	room     [3]context.CancelCauseFunc // cancels' first backing array: default attempts cost no allocation
	wake     chan struct{}              // made with the first hedge: one ended, settle looks again
	v        T                          // the winning hedge's value
	winStart time.Duration              // and its start, since the call's: the caller tells the observer its end
	err      error                      // the latest failure of a hedge
	rul      ruling                     // the hedge's ruling on it
	// The flags and small counts share a word: a round a size class
	// smaller is 64 bytes less per hedged call.
	armed    bool  // the timer will start a hedge
	firstIn  bool  // the first attempt's fn has not returned
	closed   bool  // decided: no hedge starts, the ones running lost
	won      bool  // a hedge succeeded with v
	failed   bool  // a hedge's failure, err, is the latest
	fatal    bool  // it ends the call
	inFlight int32 // hedges whose fn has not returned
	from     int32 // the attempt number of the hedge that won, or whose failure err is
	panicked any   // a hedge's fn, or a hook on its goroutine, panicked with this
}

// abandon ends a round that settle did not: the caller's goroutine is
// unwinding a panic. The hedges still running are cancelled, and no new
// one starts.
func (r *hedgeRound[T]) abandon() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closeLocked()
	cancels := r.cancels
	r.cancels = nil
	r.mu.Unlock()
	for _, cancel := range cancels {
		cancel(ErrHedgeLost)
	}
}

// ruledError is an attempt's error that WithRetryIf has judged worth
// another attempt already, ruled on again with the call's count.
type ruledError struct{ error }

func (e ruledError) Unwrap() error { return e.error }
func (ruledError) alwaysRetried()  {}

// closeLocked decides the round: no hedge starts after it, and the
// attempts still running are cancelled by whoever called it, once r.mu is
// released. Called with r.mu held.
func (r *hedgeRound[T]) closeLocked() {
	r.closed = true
	if r.armed {
		r.timer.stop() // if it fires all the same, the hedge finds r closed
		r.armed = false
	}
}

// hedgeNowLocked starts the next hedge at once, as A6 does after a
// failure worth retrying, while another attempt still runs and attempts
// are left: the delay guesses that an attempt is slow, a failure says so.
// Once none runs, the round is over and the loop's backoff comes first.
// Called with r.mu held.
func (r *hedgeRound[T]) hedgeNowLocked() {
	if !r.closed && (r.firstIn || r.inFlight > 0) && r.next <= r.c.cfg.maxAttempts {
		r.timer.reset(0)
		r.armed = true
	}
}

// hedge is one hedge's own state, on its goroutine.
type hedge struct {
	k       int                     // its attempt's number
	done    func(error)             // the breaker's, until told
	counted bool                    // in r.inFlight
	settled bool                    // out of it again
	cancel  context.CancelCauseFunc // its context's
	stop    context.CancelFunc      // its attempt timeout's
}

// fire starts a hedge, on the timer's goroutine, if the round is open and
// the breaker and the budget allow a retry now. A panic on this goroutine,
// in fn or in a hook, reaches the caller while it waits for the round
// (see panicked).
func (r *hedgeRound[T]) fire() {
	c := &r.c
	var h hedge
	defer func() {
		if p := recover(); p != nil {
			r.panickedOut(&h, p)
		}
	}()
	r.mu.Lock()
	r.armed = false
	closed := r.closed
	h.k = r.next
	r.mu.Unlock()
	if closed {
		return
	}
	var why error
	if h.done, why = r.admit(); why != nil {
		return // no hedge now, and none later in the round
	}
	ctx, cancel := context.WithCancelCause(r.base)
	h.cancel = cancel
	if c.cfg.attemptTimeout > 0 {
		ctx, h.stop = c.cfg.withTimeout(ctx, c.cfg.attemptTimeout)
	}
	r.mu.Lock()
	if closed = r.closed; !closed {
		r.next++
		r.inFlight++
		h.counted = true
		r.cancels = append(r.cancels, cancel)
		if r.wake == nil {
			r.wake = make(chan struct{}, 1)
		}
		if r.next <= c.cfg.maxAttempts {
			r.timer.reset(r.delay)
			r.armed = true
		}
	}
	r.mu.Unlock()
	if closed {
		release(h.cancel, h.stop)
		h.tell(c.cfg, ErrHedgeLost, judgedNotCounted, false)
		return
	}
	r.run(&h, ctx)
}

// admit asks a breaker that can tell whether it would refuse now, the
// budget for leave to retry (as A6 spends a retry's token on a hedge),
// then the breaker's gate.
func (r *hedgeRound[T]) admit() (done func(error), why error) {
	cfg := r.c.cfg
	if p, ok := cfg.breaker.(interface{ Refuses() error }); ok {
		if err := p.Refuses(); err != nil {
			return nil, err
		}
	}
	if b := cfg.budget; b != nil {
		if err := b.Retry(0); err != nil {
			return nil, err
		}
	}
	if br := cfg.breaker; br != nil {
		return br.Allow()
	}
	return nil, nil
}

// run makes hedge h's attempt on ctx and tells the round how it ended.
func (r *hedgeRound[T]) run(h *hedge, ctx context.Context) {
	c := &r.c
	cfg := c.cfg
	if cfg.observer != nil {
		cfg.observer.OnAttemptStart(c.ctx, AttemptStart{Name: cfg.name, Attempt: h.k})
	}
	start := cfg.clockReading()
	var v T
	var err error
	var panicked any
	func() {
		returned := false
		defer func() {
			if !returned {
				panicked = recover()
			}
		}()
		v, err = r.fn(ctx)
		returned = true
	}()
	took := cfg.clockReading() - start
	release(nil, h.stop)
	if cfg.observer != nil && (err != nil || panicked != nil) {
		e := err
		if panicked != nil {
			e = errPanicked
		}
		cfg.observer.OnAttemptEnd(c.ctx, AttemptEnd{Name: cfg.name, Attempt: h.k, Err: e, Duration: took})
	}
	if panicked != nil {
		panic(panicked) // fire's recover hands it on, fn's end told
	}
	var rul ruling
	if err != nil {
		rul = c.ruleOn(h.k, c.prevWait, err, cfg.maxAttempts)
	}
	r.mu.Lock()
	r.inFlight--
	h.settled = true
	lost := r.closed
	var cancels []context.CancelCauseFunc
	if !lost {
		switch {
		case err == nil:
			r.won, r.v, r.from, r.winStart = true, v, attemptNumber(h.k), start-c.start
			r.closeLocked()
		default:
			r.failed, r.err, r.rul, r.from = true, err, rul, attemptNumber(h.k)
			if r.fatal = endsRound(rul.verdict); r.fatal {
				r.closeLocked()
			} else {
				r.hedgeNowLocked()
			}
		}
		if r.closed {
			// Cancel the others now: Do's goroutine may be in fn.
			cancels, r.cancels = r.cancels, nil
		}
	}
	r.mu.Unlock()
	if err == nil && lost && cfg.observer != nil {
		// A winner's end is told by the caller, once idempotency has
		// recorded the outcome, as a plain attempt's is.
		cfg.observer.OnAttemptEnd(c.ctx, AttemptEnd{Name: cfg.name, Attempt: h.k, Duration: took})
	}
	for _, f := range cancels {
		f(ErrHedgeLost)
	}
	r.wakeSettle()
	h.cancel(nil)
	switch {
	case lost && err == nil:
		h.tell(cfg, nil, judgedAnswered, false)
		discard(v)
	case lost:
		h.tell(cfg, err, judgedNotCounted, false)
	case err == nil:
		h.tell(cfg, nil, judgedAnswered, false)
	default:
		h.tell(cfg, err, judged(rul.verdict), rul.hinted)
	}
}

// tell tells the breaker and the budget how the hedge's attempt ended.
func (h *hedge) tell(cfg *config, err error, j judgement, throttled bool) {
	done := h.done
	h.done = nil
	tellGuard(cfg, done, h.k, err, j, throttled)
}

// panickedOut ends hedge h, whose fn or a hook on its goroutine panicked
// with p: the breaker hears a failure, as Do's unwind tells it (the budget
// hears nothing of a panic), and the round ends with p, which settle
// raises on the caller's goroutine. A hedge that lost raises p on its
// own: nobody waits for it any more.
func (r *hedgeRound[T]) panickedOut(h *hedge, p any) {
	if done := h.done; done != nil {
		h.done = nil
		done(errPanicked)
	}
	r.mu.Lock()
	if h.counted && !h.settled {
		r.inFlight--
	}
	lost := r.closed
	var cancels []context.CancelCauseFunc
	if !lost {
		r.panicked = p
		r.closeLocked()
		cancels, r.cancels = r.cancels, nil
	}
	r.mu.Unlock()
	for _, f := range cancels {
		f(ErrHedgeLost)
	}
	release(h.cancel, h.stop)
	r.wakeSettle()
	if lost {
		panic(p)
	}
}

// wakeSettle tells settle, if it waits, that a hedge ended.
func (r *hedgeRound[T]) wakeSettle() {
	select {
	case r.wake <- struct{}{}: // made before r.inFlight counted a hedge; nil before: no one waits
	default: // settle will look anyway
	}
}

// endsRound says whether a failure with verdict v ends a hedged attempt
// and the others with it: A6's fatal status. One worth retrying, or
// whose call has no attempts or time left for another, lets the others
// run.
func endsRound(v verdict) bool {
	switch v {
	case waitAndRetry, stopExhausted, stopMaxElapsed, stopDeadline:
		return false
	}
	return true
}

// discard closes a losing attempt's value, if it is an io.Closer.
func discard[T any](v T) {
	if c, ok := any(v).(io.Closer); ok {
		_ = c.Close()
	}
}

func release(cancel context.CancelCauseFunc, stop context.CancelFunc) {
	if stop != nil {
		stop()
	}
	if cancel != nil {
		cancel(nil)
	}
}
