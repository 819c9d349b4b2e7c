package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/internal/clocks"
)

// minHolderPoll keeps a waiting caller from spinning on the store when
// the backoff schedule says not to wait at all.
const minHolderPoll = time.Millisecond

// idemState is where an idempotent call stands with its key.
type idemState uint8

const (
	fresh      idemState = iota // claimed just before attempt 1: no renewal then
	holding                     // holds the claim: renew before each attempt
	heldFirst                   // another caller held the key at the look before attempt 1
	heldByPeer                  // another caller held the key at the last look: look again
	unguarded                   // the store failed and fail-open is on: run fn unprotected
	refused                     // the store failed while this call held the claim: release it
	ranAhead                    // fn succeeded but its outcome is not recorded as such
	encoding                    // fn succeeded and its value is being encoded: a panic now must not free the key
	recording                   // fn succeeded and its outcome is being stored: a panic now leaves the claim to lapse
	finished                    // nothing left to renew or release: replayed, recorded, or lost
)

// idemCall is one idempotent call's hook: it claims the key before the
// first attempt, renews the claim before each later one, records a
// success before the loop reports it, and stores or releases the key at
// the end.
type idemCall[T any] struct {
	noHook[T]
	heldClaim // the call's key, the claim it holds and the store calls that keep it

	state    idemState
	renewing bool    // keep's renewer keeps the claim: fn runs
	value    T       // fn's value in state ranAhead
	keep     keeping // in the call, so that holding the claim allocates nothing more
	kept     bool    // keep.ctx1 is an attempt's: later ones make their own
}

// idemKeyFor returns the call's key and its payload's fingerprint; a bad
// key is bad input, reported before the call starts.
func idemKeyFor(ctx context.Context, cfg *config) (key, fp string, err error) {
	key, free := cfg.idempotencyKeyFree(ctx)
	if p := idemKeyProblem(key); p != "" {
		return "", "", fmt.Errorf("%w: %s", ErrInvalidOption, p)
	}
	if !free && chainHolds(ctx, cfg.idem.store, key) {
		// The call would wait a whole lease for itself, then take its
		// own key over. Permanent: the enclosing call, which gets this
		// error from its fn, would only meet it again.
		return "", "", Permanent(fmt.Errorf("%w: an enclosing idempotent call, whose fn this call runs in, uses the same idempotency key; give this call a key of its own (IdempotencyOptions.Key, or ContextWithIdempotencyKey in fn)", ErrInvalidOption))
	}
	return key, fingerprint(cfg.payload), nil
}

// beginIdem checks the call's key and begins the call (see begin). A
// success replayed from the store ends the call with nothing of it on
// the heap; otherwise *h is set to the call before it begins, so that a
// panic unwinds it.
func beginIdem[T any](c *call, h **idemCall[T]) (v T, err error, act action) {
	key, fp, err := idemKeyFor(c.ctx, c.cfg)
	if err != nil {
		return v, err, endCall
	}
	look := heldClaim{cfg: c.cfg, ic: c.cfg.idem, ctx: c.ctx, key: key, fp: fp}
	cl, err := look.claim()
	if err == nil && cl.Status == idempotency.ClaimCompleted && cl.Fingerprint == fp && !cl.Outcome.Permanent {
		if v, err := replayed[T](look.ic, cl.Outcome); err == nil {
			return v, nil, endCall
		}
	}
	s := &idemCall[T]{heldClaim: look, state: finished}
	*h = s
	return s.firstLook(c, cl, err)
}

func (s *idemCall[T]) heldKey() (idempotency.Store, string) { return s.ic.store, s.key }
func (s *idemCall[T]) outerCtx() context.Context            { return s.ctx }

// context marks fn's context as one in which this call holds its key, so
// that an idempotent call inside fn does not take the key as its own.
// While fn runs, the claim is renewed (see renewer); if it cannot be, fn's
// context ends before the lease could run out, and the attempt's outcome
// is unknown.
func (s *idemCall[T]) fnContext(_ *call, _ *attemptState, ctx context.Context) context.Context {
	if s.token == "" || s.stale {
		return context.WithValue(ctx, heldKeyType{}, keyHolder(s)) // fail-open: nothing to keep
	}
	var hc *heldCtx
	if !s.kept {
		s.kept = true
		hc = &s.keep.ctx1
	} else {
		hc = new(heldCtx) // fn may keep the first one: it stays as it was
	}
	ctx = s.keepClaim(ctx, &s.keep.renewal)
	s.renewing = true
	*hc = heldCtx{Context: ctx, holder: keyHolder(s)}
	return hc
}

// stopRenewing stops the claim's renewals, when fn returned or panicked,
// and returns the error that cut fn off, if one did: abandon then owns
// the call's fields, and no timer outlives Do.
func (s *idemCall[T]) stopRenewing() error {
	if !s.renewing {
		return nil
	}
	s.renewing = false
	return s.keep.renewal.stop()
}

// unwind stops the renewals and acts on the claim when fn or a hook
// panicked (see abandon).
func (s *idemCall[T]) unwind(*call, *attemptState) {
	_ = s.stopRenewing()
	s.abandon()
}

// leaseCovers says whether what is left of the claim's lease, measured
// from when the claim or its renewal was sent, covers an attempt of
// WithAttemptTimeout; without one, whether the lease is not yet over
// (the attempt's length is not known).
func (s *idemCall[T]) leaseCovers() bool {
	at := s.cfg.attemptTimeout
	if at <= 0 {
		return s.cfg.clockReading() < s.leaseEnd() // a pause may have held the call past it
	}
	return clocks.Later(s.held, s.ic.lease) >= clocks.Later(s.cfg.clockReading(), at)
}

// begin claims the key, waiting for another holder's outcome unless told
// not to, and ends the call at once for a completed key (replay), a key
// reused with another payload, or a store that failed (fail closed).
func (s *idemCall[T]) begin(c *call) (v T, err error, act action) {
	cl, err := s.claim()
	return s.firstLook(c, cl, err)
}

// firstLook is begin's part after the first look, cl and err: beginIdem
// makes that look before it makes the call.
func (s *idemCall[T]) firstLook(c *call, cl idempotency.Claim, err error) (v T, _ error, act action) {
	if !s.ic.noWait && err == nil && cl.Status == idempotency.ClaimHeld && cl.Fingerprint == s.fp {
		var done bool
		if cl, err, done = s.waitForHolder(c); done {
			return v, err, endCall
		}
	}
	v, why, mayRun := s.take(cl, err, fresh)
	switch {
	case mayRun:
		return v, nil, runFn
	case why == errHeld:
		s.state = heldFirst // the first attempt fails without a new look
		return v, nil, runFn
	case why == nil:
		return v, nil, endCall // a replayed success
	case s.ctx.Err() != nil && why == s.ctx.Err():
		return v, nil, runFn // the loop stops for the context
	}
	c.last = why
	return v, c.errorOf(OutcomePermanent, nil, nil), endCall
}

// take acts on what a look at the key found, before the first attempt or
// a later one: mayRun says fn may run now, because the call took the claim
// (its state becomes claimed) or the store failed and fail-open is on.
// Otherwise why says why not, with v: nil for a replayed success, a
// replayed permanent failure, ErrKeyReuse, errHeld, the store's failure,
// or the context's error when the store failed because the caller left.
func (s *idemCall[T]) take(cl idempotency.Claim, err error, claimed idemState) (v T, why error, mayRun bool) {
	switch {
	case err != nil && s.ctx.Err() != nil:
		return v, s.ctx.Err(), false
	case err != nil && !s.ic.failOpen:
		return v, err, false
	case err != nil:
		s.state = unguarded
		return v, nil, true
	case cl.Status != idempotency.ClaimAcquired && cl.Fingerprint != s.fp:
		return v, ErrKeyReuse, false
	case cl.Status == idempotency.ClaimCompleted:
		s.state = finished
		v, err = s.replay(cl.Outcome)
		return v, err, false
	case cl.Status == idempotency.ClaimHeld:
		return v, errHeld, false
	}
	s.state, s.token, s.held = claimed, cl.Token, s.looked
	return v, nil, true
}

// waitForHolder looks the key up again after each wait of the backoff
// schedule while another caller holds it with the same fingerprint,
// spending no attempts. The policy decides each wait as in the loop, with
// no attempt limit; done ends the call (its context, its deadline, or the
// time budget, which counts from the call's start).
func (s *idemCall[T]) waitForHolder(c *call) (cl idempotency.Claim, err error, done bool) {
	c.last = errHeld
	prev := time.Duration(0)
	for n := 1; ; n++ {
		next := c.decideNext(n, prev, errHeld, math.MaxInt)
		if next.verdict != waitAndRetry {
			return cl, c.stopFor(next.verdict), true
		}
		d := next.wait
		d = max(d, minHolderPoll)
		prev = d
		if !c.sleepOrDone(d) {
			// Not a wait OnRetry announced, so no OnWaitEnd ends it
			// either: a gauge of waits would go below 0.
			return cl, c.stopForContext(), true
		}
		cl, err = s.claim()
		if err != nil && s.ctx.Err() != nil {
			// The caller left during the look: the call still ends
			// while another holds the key (c.last stays errHeld).
			return cl, c.stopForContext(), true
		}
		if err != nil || cl.Status != idempotency.ClaimHeld || cl.Fingerprint != s.fp {
			c.last = nil
			return cl, err, false
		}
	}
}

// before looks the key up again while another caller holds it, and
// renews the claim before each later attempt. It lets fn run only while
// the call holds the key (or runs fail-open).
func (s *idemCall[T]) before(*call, *attemptState) (v T, err error, act action) {
	switch s.state {
	case heldFirst:
		s.state = heldByPeer
		return v, errHeld, skipFn
	case heldByPeer:
		cl, err := s.claim()
		v, why, mayRun := s.take(cl, err, holding)
		switch {
		case mayRun:
		case s.ctx.Err() != nil && why == s.ctx.Err():
			// The caller left during the look: the key was held at the
			// last one, so the call ends as one that found it held.
			return v, errHeld, skipFn
		case why == nil, why == errHeld, IsPermanent(why):
			return v, why, skipFn // replayed or still held
		default:
			return v, Permanent(why), skipFn
		}
	case fresh:
		s.state = holding
		if s.leaseCovers() {
			break
		}
		// The store's reply took so long that less than an attempt of
		// the lease is left: renew it first.
		fallthrough
	case holding, refused:
		s.state = holding
		s.stale = false
		if err := s.renew(); err != nil {
			switch {
			case errors.Is(err, idempotency.ErrLeaseLost):
				s.state, s.token = finished, "" // nothing left to release
				return v, Permanent(errTakenOver), skipFn
			case s.ctx.Err() != nil:
				s.state = refused
				return v, s.ctx.Err(), skipFn
			case !s.ic.failOpen:
				s.state = refused
				return v, Permanent(err), skipFn
			}
			// Fail-open: fn runs unprotected, so its attempt is not
			// cut at the end of a lease that may no longer be held.
			s.stale = true
		}
	}
	return v, nil, runFn
}

// after stops the claim's renewals, and records fn's success before the
// loop reports it, so that a success Do returns is always one the store
// keeps.
func (s *idemCall[T]) after(_ *call, _ *attemptState, v T, err error) (T, error) {
	if cut := s.stopRenewing(); cut != nil && err != nil {
		err = &cutAttempt{err: err, cut: cut}
	}
	if err != nil || s.state != holding {
		return v, err
	}
	if err := s.recordSuccess(v); err != nil {
		s.state, s.value = ranAhead, v
		var zero T
		return zero, Permanent(err)
	}
	s.state = finished
	return v, nil
}

// end stores a final failure that fn returned, or releases the claim, and
// returns what Do returns: fn's value too when its success could not be
// recorded. A final failure whose dead letter could not be written is
// not stored but released: a replay of it would be dead-lettered by no
// one, and after a failure running fn again is a retry, not a duplicate.
// An unknown outcome is stored all the same (fn may have acted), marked
// so that its replays write the dead letter.
func (s *idemCall[T]) end(_ *call, v T, err error, d *Done) (T, error) {
	switch {
	case s.state == ranAhead:
		return s.value, err
	case s.token == "":
		// No claim: replayed, lease lost, fail-open, or recorded.
	default:
		s.endHeld(err, d)
	}
	return v, err
}

// endHeld is end's part for a call that still holds its claim: apart, so
// that a call that holds none does not allocate e.
func (s *idemCall[T]) endHeld(err error, d *Done) {
	var e *Error
	switch {
	case s.state == holding && errors.As(err, &e) && e.Outcome == OutcomeUnknown:
		s.storeUnknown(e, d.DeadLetterFailed)
	case s.state == holding && errors.As(err, &e) && s.final(e) && !d.DeadLetterFailed:
		s.recordFailure(idempotency.StoredOutcome{Permanent: true, Error: errorText(e.Last)})
	default:
		s.release()
	}
}

// abandon acts on a claim still held when Do unwinds from a panic. A
// panic in fn releases the claim: the work did not
// end. A panic after fn succeeded must not free the key, or the next call
// would repeat the work: one in the value's encoding completes the key as
// a permanent failure, as an encoding error does; one in the store's
// Complete leaves the claim to lapse with its lease, since the store is
// not asked again while it panics.
func (s *idemCall[T]) abandon() {
	switch {
	case s.token == "":
	case s.state == encoding:
		s.state = recording
		_ = s.complete(idempotency.StoredOutcome{Permanent: true, Error: errorText(errEncodePanicked)})
	case s.state == recording:
		s.token = ""
	default:
		s.release()
	}
}

// recordSuccess stores v as the key's outcome. When v cannot be encoded,
// fn's side effect has happened all the same: it records a permanent
// failure instead, so that the next call does not repeat the work, and
// reports the encoding error.
func (s *idemCall[T]) recordSuccess(v T) error {
	s.state = encoding
	b, err := s.encode(v)
	s.state = recording
	if err != nil {
		encErr := &codecError{op: "encoded", err: err}
		if err := s.complete(idempotency.StoredOutcome{Permanent: true, Error: errorText(encErr)}); err != nil {
			return err
		}
		return encErr
	}
	return s.complete(idempotency.StoredOutcome{Value: b})
}

// final says whether a failure is stored rather than released.
func (s *idemCall[T]) final(e *Error) bool {
	switch e.Outcome {
	case OutcomePermanent:
		// context.Canceled from fn means someone stopped the work, not
		// that the work failed.
		return !errors.Is(e.Last, context.Canceled)
	case OutcomeExhausted, OutcomeMaxElapsed:
		return s.ic.keepFailures
	}
	return false
}

// replay turns a stored outcome into what an attempt returns: the value,
// or a permanent error.
func (s *idemCall[T]) replay(rec idempotency.StoredOutcome) (T, error) {
	return replayed[T](s.ic, rec)
}

// replayed is replay's work, with the call's settings ic.
func replayed[T any](ic *idemConfig, rec idempotency.StoredOutcome) (T, error) {
	var v T
	if rec.Permanent {
		noDeadLetter := string(rec.Value) == unknownUnrecordedValue
		unknown := noDeadLetter || string(rec.Value) == unknownValue
		return v, Permanent(&replayedError{msg: rec.Error, unknown: unknown, noDeadLetter: noDeadLetter})
	}
	if _, isDo := any(v).(struct{}); isDo {
		return v, nil
	}
	if err := ic.unmarshal(rec.Value, &v); err != nil {
		var zero T
		return zero, Permanent(&codecError{op: "decoded", err: err})
	}
	return v, nil
}

func (s *idemCall[T]) encode(v T) ([]byte, error) {
	if _, isDo := any(v).(struct{}); isDo {
		return nil, nil
	}
	return s.ic.marshal(v)
}
