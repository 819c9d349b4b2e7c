package retry

import "time"

// observing is the hook of WithObserver: it tells the Observer of each
// attempt, each retry, each wait's end and the call's end. The first
// attempt starts with the call, and a success ends with its attempt: two
// clock reads in all on the path that matters most.
type observing[T any] struct {
	noHook[T]
	// The last attempt's end, as a span since the call's start: 8 bytes
	// where a time.Time takes 24.
	lastEnd time.Duration
}

func (o *observing[T]) before(c *call, a *attemptState) (v T, err error, act action) {
	startAttempt(c, a, c.wait.prev)
	return v, nil, runFn
}

// after tells the Observer how the attempt a ended.
func (o *observing[T]) after(c *call, a *attemptState, v T, err error) (T, error) {
	endAttempt(c, a, err, &o.lastEnd)
	return v, err
}

func (o *observing[T]) retrying(c *call, d time.Duration) error {
	c.cfg.observer.OnRetry(c.ctx, Scheduled{Name: c.cfg.name, Attempt: c.attempts, Delay: d, Err: c.last})
	return nil
}

// waited tells the Observer that the wait of d > 0 that retrying announced
// ended. Cut says the call's context has ended, whichever case of
// runCall's select fired: the loop looks at the context next and ends the
// call, so no attempt follows a cut wait. Asking the context here, not
// passing the select's case, costs runCall's frame nothing; a look at its
// Done channel takes no lock, where Err on a done context takes the one of
// the channel every parked call shares.
func (o *observing[T]) waited(c *call, d time.Duration) error {
	cut := false
	select {
	case <-c.ctx.Done():
		cut = true
	default:
	}
	c.cfg.observer.OnWaitEnd(c.ctx, WaitEnd{Name: c.cfg.name, Attempt: c.attempts, Delay: d, Cut: cut})
	return nil
}

// end tells the Observer the call's outcome, d, which the hooks before it
// filled in; Done sees what Do returns.
func (o *observing[T]) end(c *call, v T, err error, d *Done) (T, error) {
	d.Name, d.Attempts, d.Err = c.cfg.name, c.attempts, err
	switch e := asError(err); {
	case err == nil:
		// A success ends with its attempt's end, when there was one
		// (every attempt that starts ends in after).
		if c.attempts == 0 {
			o.lastEnd = c.sinceStart()
		}
		d.Elapsed = o.lastEnd
	case e != nil:
		d.Outcome, d.Elapsed = e.Outcome, c.sinceStart()
	default:
		d.Outcome, d.Elapsed = OutcomePermanent, c.sinceStart()
	}
	c.cfg.observer.OnDone(c.ctx, *d)
	return v, err
}

// unwind tells the Observer, when fn or a hook panicked, that the attempt
// (if one was running) and the call ended, with errPanicked as their error
// and OutcomePermanent, so that its gauges of calls in flight come back to
// 0 (a server that recovers from a handler's panic goes on running).
func (o *observing[T]) unwind(c *call, a *attemptState) {
	if a.observed {
		o.after(c, a, *new(T), errPanicked)
	}
	c.cfg.observer.OnDone(c.ctx, Done{Name: c.cfg.name, Outcome: OutcomePermanent, Attempts: c.attempts,
		Elapsed: c.sinceStart(), Err: errPanicked})
}

// asError finds the call's *Error in err: err itself, or the error a hook
// wrapped it in (a dead letter not recorded). Unlike errors.As it does not
// make its target escape.
func asError(err error) *Error {
	for err != nil {
		switch e := err.(type) {
		case *Error:
			return e
		case *notRecordedError:
			return e.err
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		default:
			return nil
		}
	}
	return nil
}
