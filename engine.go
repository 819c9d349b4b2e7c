package retry

import (
	"context"
)

// The engine: every call of Do, DoValue, Retrier.Do and DoValueOn runs in
// runCall, and every feature joins it as a hook (hook.go). The costs are the
// package doc's Cost section and BENCHMARKS.md; the allocation,
// parked-stack and goroutine tests are their specification. The craft
// that keeps them, one trick to a comment:
//
//   - A parked call keeps runCall's frame, and its caller's, on its stack
//     while it waits: with the runtime's select and timer frames under
//     them, a call stays within a goroutine's first 2 KB stack only while
//     they stay small. So the loop's state (call) and the hooks' per-call
//     state are a few words each, a time span takes 8 bytes where a
//     time.Time takes 24, and runCall selects on the timer itself;
//     everything else is out of line (hooks.oneAttempt, the policy, the
//     events), and runCall has no defer: the hooks' methods unwind a
//     panic themselves.
//   - The entry points make a first attempt that needs no hooks
//     themselves (config.plainFirst): a success then costs ctx.Err, the
//     call of fn and the budget's count, inline (firstSucceeded's body), and builds
//     none of runCall's state. They test plainFirst and ctx.Err in two ifs,
//     not one &&: the compiler then branches on Err's result at once.
//   - With no hooks, an attempt is a call of fn in runCall itself, and
//     the hooks are never called: hooks.oneAttempt costs a frame and a
//     defer more.
//   - The package-level Do builds its config in prepare or built, kept
//     out of line (go:noinline) so that 400 bytes of config are not in
//     the frame of a call parked in a wait.

// runCall is the retry loop of the call c, which holds the Retrier's settings
// and the call's context: attempt, ask the policy, wait, until an attempt
// succeeds or the policy stops. The entry point builds c in its own
// frame, with the error of a first attempt it made itself in c.last.
func runCall[T any](c *call, fn func(context.Context) (T, error)) (T, error) {
	var hs hooks[T]
	v, err, done := hs.begin(c)
	for !done {
		var next decision // the policy's word on the failed attempt
		switch {
		case err != nil: // the entry point's first attempt failed
		case c.ctx.Err() != nil:
			err, done = c.stopForContext(), true
			continue
		case c.cfg.hooked():
			v, err, next, done = hs.oneAttempt(c, fn)
		default:
			v, err, done = plainAttempt(c, fn)
		}
		if done {
			break
		}
		if !next.made {
			next = c.decideNext(c.attempts, c.wait.prev, err, c.cfg.maxAttempts)
			hs.decided(c, next)
		}
		if next.verdict != waitAndRetry {
			err = c.stopFor(next.verdict)
			break
		}
		if err = hs.retrying(c, next.wait); err != nil {
			break
		}
		c.wait.prev, err = next.wait, nil
		if ch := armWait(c.cfg, &c.wait.timer, next.wait); ch != nil {
			select {
			case <-ch:
			case <-c.ctx.Done(): // the next look at ctx ends the call, unless waited hands the rest off
			}
			done, err = hs.waited(c, next.wait)
		}
	}
	return finishCall(c, &hs, v, err)
}

// finishCall ends the call with v and err (nil, or the call's *Error): it
// releases the timer and lets each hook have the last word, in order. A
// failed call returns the zero value, unless a hook says otherwise.
func finishCall[T any](c *call, hs *hooks[T], v T, err error) (T, error) {
	c.wait.timer.Stop(c.cfg.clock)
	if err != nil {
		v = *new(T)
	}
	if c.cfg.hooked() {
		return hs.end(c, v, err)
	}
	return v, err
}

// firstSucceeded tells the budget of a first attempt that succeeded on
// an entry point's fast path: one striped atomic add for New's default
// Ratio, nothing for a full token bucket. It is too big to inline, so Do
// and DoValueOn write it out, and only the package-level Do calls it.
func (cfg *config) firstSucceeded() {
	if r := cfg.ratio; r != nil {
		r.Attempted(1, false, false)
	} else if cfg.budget != nil && !cfg.fullBucket() {
		cfg.succeeded()
	}
}

// fullBucket says whether the budget is the library's token bucket, full.
func (cfg *config) fullBucket() bool { b := cfg.bucket; return b != nil && b.Full() }

// succeeded tells any other budget of the first attempt's success.
func (cfg *config) succeeded() { cfg.budget.Attempted(1, false, false) }

// unitFn adapts fn to the value-returning form the loop runs.
func unitFn(fn func(context.Context) error) func(context.Context) (struct{}, error) {
	return func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) }
}
