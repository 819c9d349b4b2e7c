package retry

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/steadfast-go/retry/internal/clocks"
	"github.com/steadfast-go/retry/overload"
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
// the round to be decided (awaitRound), and the loop goes on with its result.

// hedgeRound is a hedged attempt and the hedges it started. A hedge reads
// only what the loop leaves alone while the round runs, from a copy of
// the call: its cfg, ctx, start and wait.prev.
type hedgeRound[T any] struct {
	c     call // a copy: Do's stays on its stack
	fn    func(context.Context) (T, error)
	base  context.Context // the attempts' parent: the call's, with its idempotency claim
	delay time.Duration

	mu       sync.Mutex
	timer    clocks.FuncTimer
	next     int                        // the number of the next hedge's attempt
	cancels  []context.CancelCauseFunc  // the first attempt's, then each hedge's
	room     [3]context.CancelCauseFunc // cancels' first backing array: default attempts cost no allocation
	wake     chan struct{}              // made with the first hedge: one ended, awaitRound looks again
	v        T                          // the winning hedge's value
	winStart time.Duration              // and its start, since the call's: the caller tells the observer its end
	err      error                      // the latest failure of a hedge
	dec      decision                   // the policy's decision on it, for the hedge
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

// waitDecided waits, with r.mu held, until the round is decided or no
// hedge runs any more, and closes it; ctxEnded says the call's context
// ended it first.
func (r *hedgeRound[T]) waitDecided(ctx context.Context) (ctxEnded bool) {
	for !r.closed && r.inFlight > 0 {
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
		}
		r.mu.Lock()
		if ctx.Err() != nil && !r.closed {
			r.closeLocked()
			r.failed = false
			ctxEnded = true
		}
	}
	if !r.closed {
		r.closeLocked() // all have failed
	}
	return ctxEnded
}

// abandon ends a round that awaitRound did not: the caller's goroutine is
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

// retryWorthyError is an attempt's error that WithRetryIf has judged worth
// another attempt already, decided on again with the call's count.
type retryWorthyError struct{ error }

func (e retryWorthyError) Unwrap() error { return e.error }
func (retryWorthyError) alwaysRetried()  {}

// closeLocked decides the round: no hedge starts after it, and the
// attempts still running are cancelled by whoever called it, once r.mu is
// released. Called with r.mu held.
func (r *hedgeRound[T]) closeLocked() {
	r.closed = true
	if r.armed {
		r.timer.Stop() // if it fires all the same, the hedge finds r closed
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
		r.timer.Reset(0)
		r.armed = true
	}
}

// hedge is one hedge's own state, on its goroutine: with its attempt
// hooks' (attempt.go), as the loop's attempt has.
type hedge struct {
	k         int                     // its attempt's number
	a         attemptState            // the attempt timeout's and the observer's
	g         attemptGuard            // the breaker's and the budget's
	counted   bool                    // in r.inFlight
	uncounted bool                    // out of it again
	cancel    context.CancelCauseFunc // its context's
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
	// Leave to retry now, as the loop asks before a wait, then the
	// attempt's own admission. No hedge goes to a paused downstream.
	h.a.number = attemptNumber(h.k)
	if mayRetry(c.cfg, 0) != nil || c.cfg.pause.Hold(r.base, nil) > 0 || h.g.admit(c, &h.a, overload.HedgeAttempt) != nil {
		return // no hedge now, and none later in the round
	}
	ctx, cancel := context.WithCancelCause(r.base)
	h.cancel = cancel
	ctx = attemptContext(c, &h.a, ctx)
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
			r.timer.Reset(r.delay)
			r.armed = true
		}
	}
	r.mu.Unlock()
	if closed {
		h.cancel(nil)
		h.a.cancelContext()
		h.g.judge(c.cfg, h.k, ErrHedgeLost, judgedNotCounted, false)
		return
	}
	r.run(&h, ctx)
}

// run makes hedge h's attempt on ctx and tells the round how it ended.
func (r *hedgeRound[T]) run(h *hedge, ctx context.Context) {
	c := &r.c
	startAttempt(c, &h.a, 0)
	v, err, panicked := callFn(r.fn, ctx)
	var end time.Duration
	if panicked == nil {
		finishAttempt(c, &h.a, &h.g, h.k, err)
	}
	if err != nil || panicked != nil {
		e := err
		if panicked != nil {
			e = errPanicked
		}
		endAttempt(c, &h.a, e, &end)
	}
	if panicked != nil {
		panic(panicked) // fire's recover hands it on, fn's end told
	}
	var dec decision
	if err != nil {
		dec = c.decideFor(h.k, c.wait.prev, err, c.cfg.maxAttempts)
	}
	lost := r.ended(h, v, err, dec)
	if err == nil && lost {
		// A winner's end is told by the caller, once idempotency has
		// recorded the outcome, as a plain attempt's is.
		endAttempt(c, &h.a, nil, &end)
	}
	h.cancel(nil)
	switch { // a success was judged when fn returned
	case lost && err == nil:
		discard(v)
	case lost:
		h.g.judge(c.cfg, h.k, err, judgedNotCounted, false)
	case err != nil:
		h.g.judge(c.cfg, h.k, err, judged(dec.verdict), dec.hinted)
	}
}

// callFn calls fn, and returns what it panicked with instead of
// panicking: the hedge tells the hooks of its end first.
func callFn[T any](fn func(context.Context) (T, error), ctx context.Context) (v T, err error, panicked any) {
	returned := false
	defer func() {
		if !returned {
			panicked = recover()
		}
	}()
	v, err = fn(ctx)
	returned = true
	return v, err, nil
}

// ended tells the round that hedge h's attempt ended with v and err, on
// on which the policy decided dec: a success wins, a fatal failure ends the
// round, another sends the next hedge at once; the others are cancelled
// if the round is decided. lost says it was decided already.
func (r *hedgeRound[T]) ended(h *hedge, v T, err error, dec decision) (lost bool) {
	r.mu.Lock()
	r.inFlight--
	h.uncounted = true
	lost = r.closed
	var cancels []context.CancelCauseFunc
	if !lost {
		switch {
		case err == nil:
			r.won, r.v, r.from, r.winStart = true, v, attemptNumber(h.k), h.a.start
			r.closeLocked()
		default:
			r.failed, r.err, r.dec, r.from = true, err, dec, attemptNumber(h.k)
			if r.fatal = endsRound(dec.verdict); r.fatal {
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
	for _, f := range cancels {
		f(ErrHedgeLost)
	}
	r.wakeDecider()
	return lost
}

// panickedOut ends hedge h, whose fn or a hook on its goroutine panicked
// with p: the breaker hears a failure, as Do's unwind tells it (the budget
// hears nothing of a panic), and the round ends with p, which awaitRound
// raises on the caller's goroutine. A hedge that lost raises p on its
// own: nobody waits for it any more.
func (r *hedgeRound[T]) panickedOut(h *hedge, p any) {
	h.g.abort(r.c.cfg)
	r.mu.Lock()
	if h.counted && !h.uncounted {
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
	if h.cancel != nil {
		h.cancel(nil)
	}
	h.a.cancelContext()
	r.wakeDecider()
	if lost {
		panic(p)
	}
}

// wakeDecider tells awaitRound, if it waits, that a hedge ended.
func (r *hedgeRound[T]) wakeDecider() {
	select {
	case r.wake <- struct{}{}: // made before r.inFlight counted a hedge; nil before: no one waits
	default: // awaitRound will look anyway
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
