package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/internal/clocks"
)

// The store calls of an idempotent call (claim, renew, complete,
// release), each bounded by StoreTimeout on the Retrier's clock, with
// the retries of a record that must not be lost.

// recordFailure stores a final failure with one try, bounded by the
// caller's context and StoreTimeout: unlike a success's, a failure's
// record does not outlast the context. If the try fails, the claim is
// released (a try whose reply was lost stored the outcome, and the store
// then ignores the release), so the next call runs fn again: after a
// failure that is a retry, not a duplicate side effect.
func (s *heldClaim) recordFailure(rec idempotency.StoredOutcome) {
	ctx, cancel := s.storeCtx(false)
	err := s.ic.store.Complete(ctx, s.key, s.token, rec, s.ic.retention)
	cancel()
	if err == nil || errors.Is(err, idempotency.ErrLeaseLost) {
		s.token = ""
		return
	}
	s.release()
}

// storeUnknown ends a call whose last attempt's outcome is unknown. The
// claim is never released: fn may have acted, so no other caller may run
// it before the lease ends. At most once (the default), the outcome is
// stored as final, with one try detached from the ended context; if that
// fails, the claim lapses with its lease, as at least once. One stored
// without its dead letter (noDeadLetter) is marked for its replays to
// write it.
func (s *heldClaim) storeUnknown(e *Error, noDeadLetter bool) {
	if !s.ic.atLeastOnce {
		value := unknownValue
		if noDeadLetter {
			value = unknownUnrecordedValue
		}
		ctx, cancel := s.storeCtxUntil(s.detached(), s.leaseEnd())
		err := s.ic.store.Complete(ctx, s.key, s.token, idempotency.StoredOutcome{Permanent: true, Value: []byte(value), Error: errorText(e)}, s.ic.retention)
		cancel()
		_ = err // stored, lost lease, or failed: the claim is the store's either way
	}
	s.token = ""
}

// storeCtx bounds a store call on the Retrier's clock. Complete and
// Release are detached from the caller's cancellation: a caller that gave
// up must still record or free the key.
func (s *heldClaim) storeCtx(detached bool) (context.Context, context.CancelFunc) {
	parent := s.ctx
	if detached {
		parent = s.detached()
	}
	if s.ic.nonBlocking {
		return parent, noCancel // its calls return before any timeout
	}
	return s.cfg.withTimeout(parent, s.ic.storeTimeout)
}

// unavailable reports a store failure. The key is left out of the text on
// purpose: keys often carry customer or order IDs.
func (s *heldClaim) unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrIdempotencyUnavailable, op, err)
}

// claim looks the key up and claims it if it is free. Its context is the
// caller's, never the call's detached one: a call's first look
// (beginIdem) keeps s on the stack.
func (s *heldClaim) claim() (idempotency.Claim, error) {
	s.looked = s.cfg.clockReading()
	ctx, cancel := s.ctx, noCancel
	if !s.ic.nonBlocking {
		ctx, cancel = s.cfg.withTimeout(ctx, s.ic.storeTimeout)
	}
	defer cancel()
	cl, err := s.ic.store.Claim(ctx, s.key, s.fp, s.ic.lease)
	if err != nil {
		return cl, s.unavailable("claim", err)
	}
	switch {
	case cl.Status == idempotency.ClaimAcquired && cl.Token == "":
		return cl, s.unavailable("claim", errors.New("the store acquired the key without a token"))
	case cl.Status == idempotency.ClaimAcquired, cl.Status == idempotency.ClaimHeld, cl.Status == idempotency.ClaimCompleted:
		return cl, nil
	}
	return cl, s.unavailable("claim", fmt.Errorf("the store returned claim status %d", cl.Status))
}

// renew keeps idempotency.ErrLeaseLost matchable apart from other store failures.
func (s *heldClaim) renew() error {
	ctx, cancel := s.storeCtx(false)
	defer cancel()
	return s.renewIn(ctx)
}

// renewIn renews the claim with ctx, which bounds the store call.
func (s *heldClaim) renewIn(ctx context.Context) error {
	at := s.cfg.clockReading()
	err := s.ic.store.Renew(ctx, s.key, s.token, s.ic.lease)
	if err == nil {
		s.held = at
		return nil
	}
	if !errors.Is(err, idempotency.ErrLeaseLost) {
		return s.unavailable("renew", err)
	}
	return err
}

// Recording an outcome is retried this long at first, doubling up to
// maxRecordBackoff, for as long as the call may still hold its claim.
const (
	minRecordBackoff = 10 * time.Millisecond
	maxRecordBackoff = time.Second
)

// complete stores rec as the key's outcome. A transient store error is
// retried, renewing the claim between tries so that no one takes the key
// over meanwhile, while the claim is surely held: until a tenth of a lease
// before its lease, as last confirmed, could run out, and
// for no more than one lease after fn's end. Each store call is cut off
// at that bound too, so Do reports before the lease could run out. A try
// that failed may still have been stored (its reply lost), so when a
// later try finds the lease lost, complete looks the key up before it
// gives up. It returns nil once rec is stored, else an error matching
// ErrOutcomeNotRecorded. The claim is the store's again afterwards either
// way: it is not released, so that no other caller runs the work before
// the lease ends.
func (s *heldClaim) complete(rec idempotency.StoredOutcome) error {
	start := s.cfg.clockReading()
	if !s.ic.nonBlocking || start >= min(clocks.Later(start, s.ic.lease), s.leaseEnd()) {
		return s.completeRetrying(rec, start, nil)
	}
	// The first try, as completeRetrying makes it, without its timers:
	// a store that never blocks needs none to answer at once.
	err := s.ic.store.Complete(s.detached(), s.key, s.token, rec, s.ic.retention)
	switch {
	case err == nil:
		s.token = ""
		return nil
	case errors.Is(err, idempotency.ErrLeaseLost):
		return s.notRecorded(err) // the first try: nothing of ours is in the key
	}
	return s.completeRetrying(rec, start, err)
}

// completeRetrying is complete from start, the clock's reading when it
// began; failed is the error of a first try already made, or nil.
func (s *heldClaim) completeRetrying(rec idempotency.StoredOutcome, start time.Duration, failed error) error {
	retention := s.ic.retention
	lease := s.ic.lease
	detached := s.detached()
	end := clocks.Later(start, lease)
	bound := func() time.Duration { return min(end, s.leaseEnd()) }
	var timer clocks.Timer
	defer timer.Stop(s.cfg.clock)
	waits := recordWaits{cfg: s.cfg, timer: &timer}
	var lastErr error
	reclaimed := false
	for {
		var err error
		if failed != nil {
			err, failed = failed, nil
		} else {
			if s.cfg.clockReading() >= bound() {
				break
			}
			ctx, cancel := s.storeCtxUntil(detached, bound())
			err = s.ic.store.Complete(ctx, s.key, s.token, rec, retention)
			cancel()
			if err == nil {
				s.token = ""
				return nil
			}
		}
		if errors.Is(err, idempotency.ErrLeaseLost) {
			if lastErr == nil {
				// No earlier try could have been stored: another caller
				// holds the key now, and nothing of ours is in it.
				return s.notRecorded(err)
			}
			if s.recordedEarlier(detached, bound(), &timer) {
				return nil
			}
			if s.token != "" && !reclaimed { // a new claim, taken by recordedEarlier
				reclaimed = true // once: a store that loses every lease must not keep us here
				continue
			}
			return s.notRecorded(err)
		}
		lastErr = err
		if !waits.wait(bound()) {
			break
		}
		ctx, cancel := s.storeCtxUntil(detached, bound())
		err = s.renewIn(ctx)
		cancel()
		if errors.Is(err, idempotency.ErrLeaseLost) {
			if s.recordedEarlier(detached, bound(), &timer) {
				return nil
			}
			if s.token == "" {
				return s.notRecorded(err)
			}
		}
	}
	s.token = ""
	if lastErr == nil {
		lastErr = errLeaseEnding
	}
	return s.notRecorded(lastErr)
}

// recordedEarlier looks the key up after a lost lease, when an earlier try
// to record may have been stored after all. While the claim's lease still
// runs (before bound) no other caller can have completed the key, so a
// completed key with this call's fingerprint is this call's outcome. A
// lookup that fails is retried with backoff until bound, like the record
// itself. A key the store lost altogether is claimed again (s.token is then
// the new claim) so the outcome can still be recorded.
func (s *heldClaim) recordedEarlier(parent context.Context, bound time.Duration, timer *clocks.Timer) bool {
	s.token = ""
	waits := recordWaits{cfg: s.cfg, timer: timer}
	for s.cfg.clockReading() < bound {
		at := s.cfg.clockReading()
		ctx, cancel := s.storeCtxUntil(parent, bound)
		cl, err := s.ic.store.Claim(ctx, s.key, s.fp, s.ic.lease)
		cancel()
		switch {
		case err == nil && cl.Status == idempotency.ClaimCompleted:
			return cl.Fingerprint == s.fp
		case err == nil && cl.Status == idempotency.ClaimAcquired && cl.Token != "":
			s.token, s.held = cl.Token, at
			return false
		case err == nil:
			return false // held by another caller: the lease was lost
		}
		if !waits.wait(bound) {
			return false
		}
	}
	return false
}

// recordWaits are the waits between tries to record an outcome (complete,
// recordedEarlier): minRecordBackoff doubling to maxRecordBackoff, on a
// timer the tries share, detached from the caller's cancellation. A
// holder's wait (waitForHolder) is the loop's instead: the policy's, and
// cut by the context.
type recordWaits struct {
	cfg   *config
	timer *clocks.Timer
	next  time.Duration // 0: minRecordBackoff
}

// wait waits the next wait and reports true, or false, waiting nothing,
// when it would not end before bound.
func (w *recordWaits) wait(bound time.Duration) bool {
	d := max(w.next, minRecordBackoff)
	if clocks.Later(w.cfg.clockReading(), d) >= bound {
		return false
	}
	sleepDetached(w.cfg, w.timer, d)
	w.next = min(2*d, maxRecordBackoff)
	return true
}

func (s *heldClaim) notRecorded(err error) error {
	s.token = ""
	return &outcomeNotRecordedError{err: err}
}

// release frees the key; if it fails, the claim lapses with its lease.
func (s *heldClaim) release() {
	ctx, cancel := s.storeCtx(true)
	defer cancel()
	_ = s.ic.store.Release(ctx, s.key, s.token)
	s.token = ""
}
