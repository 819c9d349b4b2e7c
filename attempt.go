package retry

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/steadfast-go/retry/overload"
)

// One attempt of fn. The attempt hooks (a breaker's leave and its and a
// budget's word on the attempt, the observer's start and end, the attempt
// timeout) run through the functions below, in this order, for the
// loop's attempts (hooks.go, through the hooks' methods) and for each
// hedge on its own goroutine (hedge_round.go) alike: admit, start,
// context, fn, finish, then, once the round hooks have had their part,
// end and judge. They keep their state in the attempt's attemptState and
// read only the call's immutable config, so any goroutine may run them.

// attemptGuard is an attempt's part with a breaker, a limit and a
// budget: the breaker's done and the limit's permit, until the attempt is
// judged. The loop keeps one for its attempts, one after another
// (guard.go); each hedge has its own. It is 16 bytes: a parked call's
// frame holds it.
type attemptGuard struct {
	done    func(error)
	latency uint32 // µs, for a limit that wants it (saturated)
	permit  bool   // the limit's, held
	told    bool   // the breaker, the limit and the budget heard how the attempt ended
	// The loop's, of the whole call, here to share told's word (a parked
	// call's frame holds them); a hedge leaves them alone.
	reached bool // an attempt called fn: the first such is attempt 1 to the budget
	asked   bool // the budget allowed the wait under way (Retry): Waited gives it back
}

// mayRetry asks, before another attempt after a wait of d (0 for a
// hedge, as gRFC A6 spends a retry's token on one), a breaker that can
// tell whether it would refuse now, then the budget for leave; why is
// the refusal.
func mayRetry(cfg *config, d time.Duration) (why error) {
	if p, ok := cfg.breaker.(interface{ Refuses() error }); ok {
		if why = p.Refuses(); why != nil {
			return why
		}
	}
	if b := cfg.budget; b != nil {
		return b.Retry(d)
	}
	return nil
}

// admit asks a breaker, then a rate, then a limit, to let attempt a, of
// kind k, call fn, keeping the breaker's done and the limit's permit
// until the attempt is judged; why is a refusal. The limit may make a
// first attempt wait for a permit within the call's context. A breaker
// that allowed an attempt the rate or the limit refused hears it was not
// counted.
func (g *attemptGuard) admit(c *call, a *attemptState, k overload.Kind) (why error) {
	cfg := c.cfg
	g.told = false
	if br := cfg.breaker; br != nil {
		if g.done, why = br.Allow(); why != nil {
			return why
		}
	}
	if r := cfg.rate; r != nil {
		if why = r.Admit(c.ctx, overload.Attempt{Kind: k}); why != nil {
			g.notCounted(why)
			return why
		}
	}
	if l := cfg.limit; l != nil {
		if why = l.Acquire(c.ctx, overload.Attempt{Kind: k}); why != nil {
			g.notCounted(why)
			return why
		}
		g.permit = true
		if cfg.limitTimed && a.attempt(c) > 1 {
			a.start = c.sinceStart() // as startAttempt marks it
		}
	}
	return nil
}

// notCounted tells a breaker that allowed an attempt refused after it
// that the attempt was not counted.
func (g *attemptGuard) notCounted(why error) {
	if done := g.done; done != nil {
		g.done = nil
		done(notCountedError{why})
	}
}

// startAttempt tells the observer that attempt a starts, after a wait of
// wait.
func startAttempt(c *call, a *attemptState, wait time.Duration) {
	if c.cfg.observer == nil {
		return
	}
	if a.attempt(c) > 1 {
		a.start = c.sinceStart()
	}
	a.observed = true
	c.cfg.observer.OnAttemptStart(c.ctx, AttemptStart{Name: c.cfg.name, Attempt: a.attempt(c), Wait: wait})
}

// attemptContext is the context of attempt a's fn: ctx, with the
// attempt timeout, which finishAttempt releases.
func attemptContext(c *call, a *attemptState, ctx context.Context) context.Context {
	if c.cfg.attemptTimeout > 0 {
		ctx, a.cancel = c.cfg.withTimeout(ctx, c.cfg.attemptTimeout)
	}
	return ctx
}

// finishAttempt ends attempt a's fn: its context is released. A success
// is judged at once, as attempt n to the budget, before any hook after it
// can panic: the downstream answered.
func finishAttempt(c *call, a *attemptState, g *attemptGuard, n int, err error) {
	a.cancelContext()
	g.timeAttempt(c, a)
	if err == nil {
		g.judge(c.cfg, n, nil, judgedAnswered, false)
	}
}

// guardedFirst is an entry point's first attempt of fn through the pause,
// the rate and the limit of c, which holds only the config and the
// context (config.plainFirst): a success gives the limit's permit back at
// once, a failure keeps it for the loop to judge (hooks.begin), a
// refusal is a refusedFirst, which the loop ends the call with, and a
// pause in force is a pausedFirst, which the loop's first attempt holds. A
// panic in fn gives the permit back, dropped. It takes two words of
// arguments, as fn does: a caller keeps spill space for its callees'
// widest arguments, and Do's frame is on a parked call's stack.
func guardedFirst(c *call, fn func(context.Context) error) (err error) {
	if err = admitFirst(c); err != nil {
		return err
	}
	l := c.cfg.limit
	if l == nil {
		return fn(c.ctx)
	}
	returned := false
	defer releaseUnless(l, &returned)
	err = fn(c.ctx)
	returned = true
	if err == nil {
		l.Release(overload.Answered, 0)
	}
	return err
}

// guardedFirstValue is guardedFirst for fn that returns a value.
func guardedFirstValue[T any](c *call, fn func(context.Context) (T, error)) (v T, err error) {
	if err = admitFirst(c); err != nil {
		return v, err
	}
	l := c.cfg.limit
	if l == nil {
		return fn(c.ctx)
	}
	returned := false
	defer releaseUnless(l, &returned)
	v, err = fn(c.ctx)
	returned = true
	if err == nil {
		l.Release(overload.Answered, 0)
	}
	return v, err
}

// admitFirst asks the pause, the rate, then the limit, for an entry
// point's first attempt: nil, a pausedFirst, or a refusedFirst.
func admitFirst(c *call) error {
	cfg := c.cfg
	if cfg.pause.Paused() {
		return pausedFirst{}
	}
	first := overload.Attempt{Kind: overload.FirstAttempt}
	if r := cfg.rate; r != nil {
		if why := r.Admit(c.ctx, first); why != nil {
			return refusedFirst{why}
		}
	}
	if l := cfg.limit; l != nil {
		if why := l.Acquire(c.ctx, first); why != nil {
			return refusedFirst{why}
		}
	}
	return nil
}

// releaseUnless gives a first attempt's permit back, dropped, unless fn
// returned: it panicked.
func releaseUnless(l overload.Limit, returned *bool) {
	if !*returned {
		l.Release(overload.Dropped, 0)
	}
}

// refusedFirst is the limit's refusal of an entry point's first attempt,
// in place of its error: no attempt was made.
type refusedFirst struct{ why error }

func (r refusedFirst) Error() string { return r.why.Error() }

// pausedFirst is an entry point's first attempt that a pause in force
// left for the loop to hold: no attempt was made.
type pausedFirst struct{}

func (pausedFirst) Error() string { return overload.ErrPaused.Error() }

// timeAttempt keeps how long attempt a took, for a limit that wants it.
func (g *attemptGuard) timeAttempt(c *call, a *attemptState) {
	if g.permit && c.cfg.limitTimed {
		g.latency = uint32(min((c.sinceStart()-a.start)/time.Microsecond, math.MaxUint32))
	}
}

// endAttempt tells the observer, if it heard attempt a start, that a
// ended with err, at end (since the call's start), which it sets.
func endAttempt(c *call, a *attemptState, err error, end *time.Duration) {
	if !a.observed {
		return
	}
	a.observed = false
	*end = c.sinceStart()
	c.cfg.observer.OnAttemptEnd(c.ctx, AttemptEnd{Name: c.cfg.name, Attempt: a.attempt(c), Err: err, Duration: *end - a.start})
}

// judge tells the breaker that admitted the attempt, then the limit that
// gave it a permit, then the budget, how it ended (attempt n to the
// budget; j as the policy judged err), once: in this order, so that a
// budget that panics can leave neither a half-open breaker waiting nor a
// permit held.
func (g *attemptGuard) judge(cfg *config, n int, err error, j judgement, throttled bool) {
	if g.told {
		return
	}
	g.told = true
	done := g.done
	g.done = nil
	if done != nil {
		switch j {
		case judgedAnswered:
			done(nil)
		case judgedNotCounted:
			done(notCountedError{err})
		default:
			done(err)
		}
	}
	g.release(cfg, limitResults[j])
	// Only a success refunds a budget, as gRFC A6 counts: a permanent
	// answer or an attempt that says nothing of the downstream is not told.
	if b := cfg.budget; b != nil && (err == nil || j == judgedFailure) {
		b.Attempted(n, j == judgedFailure, throttled)
	}
}

// limitResults is what a limit hears of an attempt judged so.
var limitResults = [...]overload.Result{
	judgedAnswered:   overload.Answered,
	judgedNotCounted: overload.Dropped,
	judgedFailure:    overload.Failed,
}

// release gives the limit's permit back, once, with r and the latency
// finishAttempt measured.
func (g *attemptGuard) release(cfg *config, r overload.Result) {
	if g.permit {
		g.permit = false
		cfg.limit.Release(r, time.Duration(g.latency)*time.Microsecond)
	}
}

// abort tells a breaker that admitted the attempt, whose fn or a hook
// panicked, that it failed (as gobreaker's own Execute counts it), so
// that a half-open breaker is not left waiting, and gives a limit's
// permit back, dropped. The budget hears nothing of a panic.
func (g *attemptGuard) abort(cfg *config) {
	if done := g.done; done != nil {
		g.done = nil
		done(errPanicked)
	}
	g.release(cfg, overload.Dropped)
}

// errPanicked is what a breaker and an observer hear of an attempt that
// panicked: its fn, or the WithRetryIf that judged its error.
var errPanicked = errors.New("retry: the attempt panicked")

// notCountedError is what a breaker hears of an attempt that says nothing
// of the downstream: it matches overload.ErrNotCounted and the attempt's
// error.
type notCountedError struct{ err error }

func (e notCountedError) Error() string {
	return overload.ErrNotCounted.Error() + ": " + errorText(e.err)
}
func (e notCountedError) Unwrap() []error { return []error{overload.ErrNotCounted, e.err} }

// cancelContext cancels the attempt's context, once.
func (a *attemptState) cancelContext() {
	if a.cancel != nil {
		a.cancel()
		a.cancel = nil
	}
}
