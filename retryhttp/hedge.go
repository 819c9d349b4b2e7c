package retryhttp

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/steadfast-go/retry"
)

// A hedged RoundTrip (the Retrier has retry.WithHedge, and the request is
// idempotent or keyed, with a body that can be sent again) runs its
// attempts through retry.HedgeValue: several at once, the first on
// RoundTrip's goroutine, each hedge on its own. So each attempt is a call
// of its own (new, never pooled: a losing attempt may still be running
// when RoundTrip has returned), with its own request copy and body, its
// own held response and its own context; what they share is in
// hedgedCall, under its mutex.

// hedgedCall is what the attempts of a hedged RoundTrip share.
type hedgedCall struct {
	tmpl call // the request and settings each attempt copies; read only

	mu      sync.Mutex
	started int  // attempts that sent the request (or tried to)
	done    bool // the call is decided: an attempt that starts sends nothing
	// The attempts that ended on a status, their responses held: one of
	// them may be the call's last response, told by its *StatusError.
	held   []heldAttempt
	latest *call // the attempt that ended last, if it ended on a status
	// The responses of the attempts that succeeded: those that are not
	// the call's are closed, whether or not package retry closed them.
	won []*http.Response
}

type heldAttempt struct {
	a  *call
	se *StatusError // the attempt's own copy
}

// hedge runs the call's attempts through retry.HedgeValue and leaves in
// c what run expects of a call whose attempts were sequential: the
// attempt count, and the last response when the call failed on a status.
func (c *call) hedge(r *retry.Retrier) (outcome, error) {
	h := &hedgedCall{tmpl: *c}
	h.tmpl.fn, h.tmpl.drain, h.tmpl.hedged = nil, nil, true
	out, err := retry.HedgeValue(c.ctx, r, h.attempt)

	h.mu.Lock()
	h.done = true
	c.attempts = h.started
	var take *call
	if err != nil {
		// The response of the attempt whose status the call ended on;
		// else, as for sequential attempts, that of the attempt that
		// ended last when it ended on a status (the call then ended
		// on a refusal: the breaker's, the budget's).
		var se *StatusError
		if errors.As(err, &se) {
			for _, ha := range h.held {
				if ha.se == se {
					take = ha.a
				}
			}
		}
		if take == nil {
			take = h.latest
		}
	}
	held, won := h.held, h.won
	h.held, h.latest, h.won = nil, nil, nil
	h.mu.Unlock()

	for _, resp := range won {
		if resp != out.resp || err != nil {
			resp.Body.Close()
		}
	}

	for _, ha := range held {
		if ha.a != take {
			ha.a.dropLast()
		}
	}
	if take != nil {
		c.last, c.rest, c.restErr, c.lastCancel, c.drain = take.last, take.rest, take.restErr, take.lastCancel, take.drain
	}
	return out, err
}

// attempt is the function HedgeValue runs: one attempt, on a call of its
// own. One that starts once the call is decided (a hedge that its timer
// started as another attempt won) sends nothing.
func (h *hedgedCall) attempt(ctx context.Context) (outcome, error) {
	h.mu.Lock()
	if h.done {
		h.mu.Unlock()
		return outcome{}, retry.ErrHedgeLost
	}
	h.started++
	a := new(call)
	*a = h.tmpl
	a.attempts = h.started - 1 // a.attempt counts itself: the first sends the request's body, the others GetBody's
	h.mu.Unlock()

	out, err := a.attempt(ctx)

	var se *StatusError
	if a.last != nil {
		errors.As(err, &se)
	}
	h.mu.Lock()
	lost := h.done
	switch {
	case lost:
	case err == nil && out.resp != nil:
		h.won = append(h.won, out.resp)
	case a.last != nil:
		h.held = append(h.held, heldAttempt{a: a, se: se})
		h.latest = a
	default:
		h.latest = nil
	}
	h.mu.Unlock()
	if lost {
		// Nobody takes this attempt's response: package retry closes
		// a success's (outcome is an io.Closer), but it is closed here
		// all the same, as is a failure's held one.
		a.dropLast()
		if err == nil && out.resp != nil {
			out.resp.Body.Close()
		}
	}
	return out, err
}

// attemptCause is why the context of a hedged call's attempt ended before
// its response headers: another attempt won (retry.ErrHedgeLost), or the
// attempt timed out.
func attemptCause(ctx context.Context) error {
	if cause := context.Cause(ctx); errors.Is(cause, retry.ErrHedgeLost) {
		return retry.ErrHedgeLost
	}
	return errAttemptTimeout
}
