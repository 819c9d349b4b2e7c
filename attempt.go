package retry

import (
	"context"
	"errors"
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

// attemptGuard is an attempt's part with a breaker and a budget: the
// breaker's done, until the attempt is judged. The loop keeps one for its
// attempts, one after another (guard.go); each hedge has its own.
type attemptGuard struct {
	done func(error)
	told bool // the breaker and the budget heard how the attempt ended
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

// admit asks a breaker to let the attempt call fn, keeping its done until
// the attempt is judged; why is its refusal.
func (g *attemptGuard) admit(cfg *config) (why error) {
	g.told = false
	if br := cfg.breaker; br != nil {
		g.done, why = br.Allow()
	}
	return why
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
	if err == nil {
		g.judge(c.cfg, n, nil, judgedAnswered, false)
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

// judge tells the breaker that admitted the attempt, then the budget,
// how it ended (attempt n to the budget; j as the policy judged err),
// once: the breaker first, so that a budget that panics cannot leave a
// half-open breaker waiting.
func (g *attemptGuard) judge(cfg *config, n int, err error, j judgement, throttled bool) {
	if g.told {
		return
	}
	g.told = true
	done := g.done
	g.done = nil
	tellGuard(cfg, done, n, err, j, throttled)
}

// abort tells a breaker that admitted the attempt, whose fn or a hook
// panicked, that it failed (as gobreaker's own Execute counts it), so
// that a half-open breaker is not left waiting. The budget hears nothing
// of a panic.
func (g *attemptGuard) abort() {
	if done := g.done; done != nil {
		g.done = nil
		done(errPanicked)
	}
}

// tellGuard tells a breaker's done, then the budget, how attempt n ended:
// the breaker first, so that a budget that panics cannot leave a
// half-open breaker waiting. Only a success refunds a budget, as gRFC A6
// counts: a permanent answer or an attempt that says nothing of the
// downstream is not told.
func tellGuard(cfg *config, done func(error), n int, err error, j judgement, throttled bool) {
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
	if b := cfg.budget; b != nil && (err == nil || j == judgedFailure) {
		b.Attempted(n, j == judgedFailure, throttled)
	}
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
