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
	fp     string        // the payload's fingerprint, stored with the key
	token  string        // the claim this call holds; "" when none
	held   time.Duration // clock reading when the claim was last taken or renewed, before the store call
	looked time.Duration // clock reading when the last Claim was sent
	stale  bool          // fail-open: the last Renew failed, so held says nothing of the lease
}

// detached returns the call's context without its cancellation, for the
// store calls that must outlast a caller who gave up.
func (s *heldClaim) detached() context.Context { return (*detachedCtx)(s) }

// leaseEnd is when the claim may stop being held, as Do counts it: one
// lease after it was last taken or renewed, less a tenth of the lease left
// for the store's clock and the network. Store calls that need the claim
// are cut off by then.
func (s *heldClaim) leaseEnd() time.Duration {
	return clocks.Later(s.held, s.ic.lease-s.ic.lease/10)
}

// storeCtxUntil bounds a store call by StoreTimeout and by until. A store
// that never blocks (idempotency.NonBlocking) gets parent itself while
// until is still ahead: its call returns before any bound could matter, and
// a timer per call would cost more than the call.
func (s *heldClaim) storeCtxUntil(parent context.Context, until time.Duration) (context.Context, context.CancelFunc) {
	d := min(s.ic.storeTimeout, max(clocks.Later(until, -s.cfg.clockReading()), 0))
	if s.ic.nonBlocking && d > 0 {
		return parent, noCancel
	}
	return s.cfg.withTimeout(parent, d)
}

// noCancel is the CancelFunc of a store call that needs no timer.
func noCancel() {}

// detachedCtx is the call's context without its cancellation, as
// context.WithoutCancel makes it: the call itself under another type, so
// that each store call detached from the caller's cancellation costs no
// allocation, and the call no room.
type detachedCtx heldClaim

func (*detachedCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*detachedCtx) Done() <-chan struct{}       { return nil }
func (*detachedCtx) Err() error                  { return nil }

// Value is context.WithoutCancel's: the parent's values, but not its
// cancellation's (context.Cause).
func (c *detachedCtx) Value(key any) any { return context.WithoutCancel(c.ctx).Value(key) }

func (c *detachedCtx) String() string { return "retry.detached" }

// heldCtx is fn's context: ctx (fn's, cancelled when the claim cannot be
// kept) carrying the idempotent call that runs fn under heldKeyType, in
// one value rather than two.
type heldCtx struct {
	context.Context
	holder keyHolder
}

func (c *heldCtx) Value(key any) any {
	if key == (heldKeyType{}) {
		return c.holder
	}
	return c.Context.Value(key)
}

// keeping is what an idempotent call needs while fn runs under its claim.
type keeping struct {
	renewal renewer
	ctx1    heldCtx // the first attempt's fn context; later ones make their own
}

// renewer keeps an idempotent call's claim while fn runs: the Retrier's
// schedule of renewals (idemConfig.renewals, one timer of the Retrier's
// clock for all its calls) renews it a third of a lease after it was
// last confirmed, and again after each renewal. If the claim cannot be
// renewed before its lease could run out, fn's context is cancelled with
// cut as the cause, so that no other caller takes the key over while fn
// still runs. A renewal runs on the timer's goroutine, only while the
// call's goroutine waits in fn; stop makes the call's goroutine wait for a
// renewal under way, so that the call's fields it writes are the call's
// again. Each call has one, reused by its attempts.
type renewer struct {
	s      *heldClaim
	cancel context.CancelCauseFunc
	entry  clocks.Entry // in the Retrier's schedule while a renewal is due

	mu      sync.Mutex
	stopped bool
	cut     error // set once fn's context was cancelled for the claim
}

// keepClaim returns fn's context, which ends when the claim cannot be
// renewed, and schedules r to renew the claim while fn runs; stop r when
// fn returns.
func (s *heldClaim) keepClaim(ctx context.Context, r *renewer) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	r.s, r.cancel = s, cancel
	r.mu.Lock()
	r.stopped, r.cut = false, nil
	r.mu.Unlock()
	s.ic.renewals.Add(&r.entry, clocks.Later(s.held, s.ic.lease/3), r)
	return ctx
}

// RunScheduled renews the claim, when the schedule says it is due.
func (r *renewer) RunScheduled() { r.renew() }

// renew renews the claim once; on failure it tries again a tenth of a
// lease later while the lease surely lasts, and cuts fn off otherwise
// (fail-open: fn runs on, unprotected).
func (r *renewer) renew() {
	s := r.s
	at := s.cfg.clockReading()
	ctx, cancel := s.storeCtxUntil(s.detached(), s.leaseEnd())
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
			s.ic.renewals.Add(&r.entry, clocks.Later(at, s.ic.lease/3), r)
		}
	case s.ic.failOpen:
		s.stale = true
	case !errors.Is(err, idempotency.ErrLeaseLost) && s.leaseEnd() > clocks.Later(s.cfg.clockReading(), retryIn):
		if !r.stopped {
			s.ic.renewals.Add(&r.entry, clocks.Later(s.cfg.clockReading(), retryIn), r)
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
	r.mu.Unlock()
	r.s.ic.renewals.Remove(&r.entry)
	r.entry.Wait()
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
