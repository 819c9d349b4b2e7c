package retry

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/internal/clocks"
)

// heldClaim is an idempotent call's key and the claim it holds on it:
// what a renewer keeps up to date while fn runs, and what the store calls
// (idempotency_store.go) read and write.
type heldClaim struct {
	cfg    *config
	ic     *idemConfig
	ctx    context.Context
	key    string
	fp     string    // the payload's fingerprint, stored with the key
	token  string    // the claim this call holds; "" when none
	held   time.Time // when the claim was last taken or renewed, read before the store call
	looked time.Time // when the last Claim was sent
	stale  bool      // fail-open: the last Renew failed, so held says nothing of the lease
}

// leaseEnd is when the claim may stop being held, as Do counts it: one
// lease after it was last taken or renewed, less a tenth of the lease left
// for the store's clock and the network. Store calls that need the claim
// are cut off by then.
func (s *heldClaim) leaseEnd() time.Time {
	return s.held.Add(s.ic.lease - s.ic.lease/10)
}

// storeCtxUntil bounds a store call by StoreTimeout and by until.
func (s *heldClaim) storeCtxUntil(parent context.Context, until time.Time) (context.Context, context.CancelFunc) {
	return s.cfg.withTimeout(parent, min(s.ic.storeTimeout, max(until.Sub(s.cfg.clockNow()), 0)))
}

// renewer keeps an idempotent call's claim while fn runs: a timer of the
// Retrier's clock renews it a third of a lease after it was last
// confirmed, and again after each renewal. If the claim cannot be renewed
// before its lease could run out, fn's context is cancelled with cut as
// the cause, so that no other caller takes the key over while fn still
// runs. It runs on the timer's goroutine, only while the call's goroutine
// waits in fn; stop makes the call's goroutine wait for a renewal under
// way, so that the call's fields it writes are the call's again.
type renewer struct {
	s      *heldClaim
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	stopped bool
	timer   clocks.FuncTimer
	running sync.WaitGroup
	cut     error // set once fn's context was cancelled for the claim
}

// keepClaim returns fn's context, which ends when the claim cannot be
// renewed, and the renewer that does it; stop it when fn returns.
func (s *heldClaim) keepClaim(ctx context.Context) (context.Context, *renewer) {
	ctx, cancel := context.WithCancelCause(ctx)
	r := &renewer{s: s, cancel: cancel}
	r.mu.Lock() // the timer may fire before arm has stored it
	r.arm(s.held.Add(s.ic.lease / 3).Sub(s.cfg.clockNow()))
	r.mu.Unlock()
	return ctx, r
}

// arm sets the timer for the next renewal, d from now. The caller holds
// r.mu.
func (r *renewer) arm(d time.Duration) {
	r.timer = r.s.cfg.afterFunc(d, r.renew)
}

// renew renews the claim once; on failure it tries again a tenth of a
// lease later while the lease surely lasts, and cuts fn off otherwise
// (fail-open: fn runs on, unprotected).
func (r *renewer) renew() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.running.Add(1)
	r.mu.Unlock()
	defer r.running.Done()

	s := r.s
	at := s.cfg.clockNow()
	ctx, cancel := s.storeCtxUntil(context.WithoutCancel(s.ctx), s.leaseEnd())
	err := s.ic.store.Renew(ctx, s.key, s.token, s.ic.lease)
	cancel()

	r.mu.Lock()
	defer r.mu.Unlock()
	switch retryIn := s.ic.lease / 10; {
	case err == nil:
		s.held = at
		if !r.stopped {
			// A third of a lease after this renewal was sent, not after
			// its reply: a slow store must not push the next one late.
			r.arm(max(at.Add(s.ic.lease/3).Sub(s.cfg.clockNow()), 0))
		}
	case s.ic.failOpen:
		s.stale = true
	case !errors.Is(err, idempotency.ErrLeaseLost) && s.leaseEnd().Sub(s.cfg.clockNow()) > retryIn:
		if !r.stopped {
			r.arm(retryIn)
		}
	case r.stopped:
		// fn returned while the renewal was under way: it was not cut
		// off, and its outcome is its own. The call renews the claim
		// before any later attempt.
	default:
		r.cut = &claimNotKeptError{err: err}
		r.cancel(r.cut)
	}
}

// stop ends the renewals and returns the error that cut fn off, if one
// did; once it returns, no renewal runs.
func (r *renewer) stop() error {
	r.mu.Lock()
	r.stopped = true
	r.timer.Stop()
	r.mu.Unlock()
	r.running.Wait()
	r.cancel(nil)
	return r.cut
}

// claimNotKeptError is the cause of fn's context when its claim could not
// be renewed while it ran. fn ran, so it does not match
// ErrIdempotencyUnavailable (which says fn did not run).
type claimNotKeptError struct{ err error }

func (e *claimNotKeptError) Error() string {
	return "retry: the idempotency claim could not be renewed while fn ran, so fn was stopped before the lease could run out: " + errorText(e.err)
}

func (e *claimNotKeptError) Unwrap() error { return e.err }
