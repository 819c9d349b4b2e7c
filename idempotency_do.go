package retry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/steadfast-go/retry/internal/idemctx"
)

// errHeld is what an attempt returns when another caller holds the key.
// It is its own value, not ErrInProgress itself, so that Do can retry it
// whatever WithRetryIf says without also retrying an ErrInProgress that
// fn returns (from an inner Do).
var errHeld error = heldError{}

type heldError struct{}

func (heldError) Error() string {
	return "retry: idempotency key held by another caller; its outcome is not known yet"
}
func (heldError) Unwrap() error  { return ErrInProgress }
func (heldError) alwaysRetried() {}

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
	settled                     // nothing left to renew or release: replayed, recorded, or lost
)

// idemCall is one idempotent call's hook: it claims the key before the
// first attempt, renews the claim before each later one, records a
// success before the loop reports it, and stores or releases the key at
// the end.
type idemCall[T any] struct {
	noHook[T]
	heldClaim // the call's key and the claim it holds, which a renewer keeps
	fp        string

	state    idemState
	looked   time.Time // when the last Claim was sent
	value    T         // fn's value in state ranAhead
	renewing *renewer  // keeps the claim while fn runs; nil between attempts
}

// newIdemCall checks the call's key; a bad one is bad input, reported
// before the call starts.
func newIdemCall[T any](ctx context.Context, cfg *config) (*idemCall[T], error) {
	key := cfg.idempotencyKey(ctx)
	if p := idemKeyProblem(key); p != "" {
		return nil, fmt.Errorf("%w: %s", ErrInvalidOption, p)
	}
	if chainHolds(ctx, cfg.idem.store, key) {
		// The call would wait a whole lease for itself, then take its
		// own key over. Permanent: the enclosing call, which gets this
		// error from its fn, would only meet it again.
		return nil, Permanent(fmt.Errorf("%w: an enclosing idempotent call, whose fn this call runs in, uses the same idempotency key; give this call a key of its own (IdempotencyOptions.Key, or ContextWithIdempotencyKey in fn)", ErrInvalidOption))
	}
	return &idemCall[T]{heldClaim: heldClaim{cfg: cfg, ic: cfg.idem, ctx: ctx, key: key}, fp: fingerprint(cfg.payload), state: settled}, nil
}

// idempotencyKey returns the call's idempotency key: the context's, else
// the option's ("" when the call is not idempotent). A context key that
// an enclosing idempotent call holds (it reached this call through that
// call's fn) was meant for that call: IdempotencyOptions.Key wins over it.
func (cfg *config) idempotencyKey(ctx context.Context) string {
	if cfg.idem == nil {
		return ""
	}
	k, ok := IdempotencyKeyFromContext(ctx)
	if !ok {
		return cfg.idem.key
	}
	if chainHolds(ctx, cfg.idem.store, k) {
		// Meant for the enclosing call: this call's own key wins, the
		// option's or the one retryhttp gives a request.
		if cfg.idem.key != "" {
			return cfg.idem.key
		}
		if rk, ok := idemctx.RequestKey(ctx); ok {
			return rk
		}
	}
	return k
}

// heldKeyType is the context key under which the context given to fn
// carries the idempotent call that runs it (a keyHolder).
type heldKeyType struct{}

// keyHolder is an idempotent call as the contexts of its fn know it.
type keyHolder interface {
	heldKey() (IdempotencyStore, string)
	outerCtx() context.Context // the context the call was given
}

func (s *idemCall[T]) heldKey() (IdempotencyStore, string) { return s.ic.store, s.key }
func (s *idemCall[T]) outerCtx() context.Context           { return s.ctx }

// chainHolds says whether an idempotent call enclosing ctx (one whose fn
// was given ctx or a context derived from it) uses key in store: keys are
// global within a store, so the same key in another store is another key.
func chainHolds(ctx context.Context, store IdempotencyStore, key string) bool {
	for depth := 0; ctx != nil && depth < maxInnerDepth; depth++ {
		h, ok := ctx.Value(heldKeyType{}).(keyHolder)
		if !ok {
			return false
		}
		if st, k := h.heldKey(); k == key && sameStore(st, store) {
			return true
		}
		ctx = h.outerCtx()
	}
	return false
}

// maxInnerDepth bounds how many enclosing idempotent calls chainHolds
// looks through.
const maxInnerDepth = 64

// sameStore compares two stores as interface values, without panicking
// on a store type that is not comparable (one such is never the same).
func sameStore(a, b IdempotencyStore) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// context marks fn's context as one in which this call holds its key, so
// that an idempotent call inside fn does not take the key as its own.
// While fn runs, the claim is renewed (see renewer); if it cannot be, fn's
// context ends before the lease could run out, and the attempt's outcome
// is unknown.
func (s *idemCall[T]) fnContext(_ *call, _ *attemptState, ctx context.Context) context.Context {
	ctx = context.WithValue(ctx, heldKeyType{}, keyHolder(s))
	if s.token == "" || s.stale {
		return ctx // fail-open: nothing to keep
	}
	ctx, s.renewing = s.keepClaim(ctx)
	return ctx
}

// stopRenewing stops the claim's renewals, when fn returned or panicked,
// and returns the error that cut fn off, if one did: abandon then owns
// the call's fields, and no timer outlives Do.
func (s *idemCall[T]) stopRenewing() error {
	r := s.renewing
	if r == nil {
		return nil
	}
	s.renewing = nil
	return r.stop()
}

// unwind stops the renewals and acts on the claim when fn or a hook
// panicked (see abandon).
func (s *idemCall[T]) unwind(*call, *attemptState) {
	_ = s.stopRenewing()
	s.abandon()
}

// leaseCovers says whether what is left of the claim's lease, measured
// from when the claim or its renewal was sent, covers an attempt of
// WithAttemptTimeout (always, without one: the attempt's length is not
// known).
func (s *idemCall[T]) leaseCovers() bool {
	at := s.cfg.attemptTimeout
	return at <= 0 || s.held.Add(s.ic.lease).Sub(s.cfg.clockNow()) >= at
}

// begin claims the key, waiting for another holder's outcome unless told
// not to, and ends the call at once for a completed key (replay), a key
// reused with another payload, or a store that failed (fail closed).
func (s *idemCall[T]) begin(c *call) (v T, err error, act action) {
	cl, err := s.claim()
	if !s.ic.noWait && err == nil && cl.Status == ClaimHeld && cl.Fingerprint == s.fp {
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
func (s *idemCall[T]) take(cl Claim, err error, claimed idemState) (v T, why error, mayRun bool) {
	switch {
	case err != nil && s.ctx.Err() != nil:
		return v, s.ctx.Err(), false
	case err != nil && !s.ic.failOpen:
		return v, err, false
	case err != nil:
		s.state = unguarded
		return v, nil, true
	case cl.Status != ClaimAcquired && cl.Fingerprint != s.fp:
		return v, ErrKeyReuse, false
	case cl.Status == ClaimCompleted:
		s.state = settled
		v, err = s.replay(cl.Outcome)
		return v, err, false
	case cl.Status == ClaimHeld:
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
func (s *idemCall[T]) waitForHolder(c *call) (cl Claim, err error, done bool) {
	c.last = errHeld
	prev := time.Duration(0)
	for n := 1; ; n++ {
		next := c.nextStep(n, prev, errHeld, math.MaxInt)
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
		if err != nil || cl.Status != ClaimHeld || cl.Fingerprint != s.fp {
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
			case errors.Is(err, ErrLeaseLost):
				s.state, s.token = settled, "" // nothing left to release
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
	s.state = settled
	return v, nil
}

// end stores a final failure that fn returned, or releases the claim, and
// returns what Do returns: fn's value too when its success could not be
// recorded.
func (s *idemCall[T]) end(_ *call, v T, err error, _ *Done) (T, error) {
	var e *Error
	switch {
	case s.state == ranAhead:
		return s.value, err
	case s.token == "":
		// No claim: replayed, lease lost, fail-open, or recorded.
	case s.state == holding && errors.As(err, &e) && e.Outcome == OutcomeUnknown:
		s.settleUnknown(e)
	case s.state == holding && errors.As(err, &e) && s.final(e):
		s.recordFailure(StoredOutcome{Permanent: true, Error: errorText(e.Last)})
	default:
		s.release()
	}
	return v, err
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
		_ = s.complete(StoredOutcome{Permanent: true, Error: errorText(errEncodePanicked)})
	case s.state == recording:
		s.token = ""
	default:
		s.release()
	}
}

// errEncodePanicked is the stored failure of a call whose fn succeeded and
// whose value's encoding panicked.
var errEncodePanicked = &codecError{op: "encoded", err: errCodecPanicked}

// errCodecPanicked stands for the panic of a codec in a codecError.
var errCodecPanicked = errors.New("the idempotency codec panicked")

// recordFailure stores a final failure with one try, bounded by the
// caller's context and StoreTimeout: unlike a success's, a failure's
// record does not outlast the context. If the try fails, the claim is
// released (a try whose reply was lost stored the outcome, and the store
// then ignores the release), so the next call runs fn again: after a
// failure that is a retry, not a duplicate side effect.
func (s *idemCall[T]) recordFailure(rec StoredOutcome) {
	ctx, cancel := s.storeCtx(false)
	err := s.ic.store.Complete(ctx, s.key, s.token, rec, s.ic.retention)
	cancel()
	if err == nil || errors.Is(err, ErrLeaseLost) {
		s.token = ""
		return
	}
	s.release()
}

// unknownValue is the Value of a stored unknown outcome.
const unknownValue = "outcome-unknown"

// settleUnknown ends a call whose last attempt's outcome is unknown. The
// claim is never released: fn may have acted, so no other caller may run
// it before the lease ends. At most once (the default), the outcome is
// stored as final, with one try detached from the ended context; if that
// fails, the claim lapses with its lease, as at least once.
func (s *idemCall[T]) settleUnknown(e *Error) {
	if !s.ic.atLeastOnce {
		ctx, cancel := s.storeCtxUntil(context.WithoutCancel(s.ctx), s.leaseEnd())
		err := s.ic.store.Complete(ctx, s.key, s.token, StoredOutcome{Permanent: true, Value: []byte(unknownValue), Error: errorText(e)}, s.ic.retention)
		cancel()
		_ = err // stored, lost lease, or failed: the claim is the store's either way
	}
	s.token = ""
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
		if err := s.complete(StoredOutcome{Permanent: true, Error: errorText(encErr)}); err != nil {
			return err
		}
		return encErr
	}
	return s.complete(StoredOutcome{Value: b})
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
func (s *idemCall[T]) replay(rec StoredOutcome) (T, error) {
	var v T
	if rec.Permanent {
		return v, Permanent(&replayedError{msg: rec.Error, unknown: string(rec.Value) == unknownValue})
	}
	if _, isDo := any(v).(struct{}); isDo {
		return v, nil
	}
	if err := s.ic.unmarshal(rec.Value, &v); err != nil {
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

// storeCtx bounds a store call on the Retrier's clock. Complete and
// Release are detached from the caller's cancellation: a caller that gave
// up must still record or free the key.
func (s *idemCall[T]) storeCtx(detached bool) (context.Context, context.CancelFunc) {
	parent := s.ctx
	if detached {
		parent = context.WithoutCancel(parent)
	}
	return s.storeCtxFrom(parent)
}

func (s *idemCall[T]) storeCtxFrom(parent context.Context) (context.Context, context.CancelFunc) {
	return s.cfg.withTimeout(parent, s.ic.storeTimeout)
}

// unavailable reports a store failure. The key is left out of the text on
// purpose: keys often carry customer or order IDs.
func (s *idemCall[T]) unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrIdempotencyUnavailable, op, err)
}

func (s *idemCall[T]) claim() (Claim, error) {
	s.looked = s.cfg.clockNow()
	ctx, cancel := s.storeCtx(false)
	defer cancel()
	cl, err := s.ic.store.Claim(ctx, s.key, s.fp, s.ic.lease)
	if err != nil {
		return cl, s.unavailable("claim", err)
	}
	switch {
	case cl.Status == ClaimAcquired && cl.Token == "":
		return cl, s.unavailable("claim", errors.New("the store acquired the key without a token"))
	case cl.Status == ClaimAcquired, cl.Status == ClaimHeld, cl.Status == ClaimCompleted:
		return cl, nil
	}
	return cl, s.unavailable("claim", fmt.Errorf("the store returned claim status %d", cl.Status))
}

// renew keeps ErrLeaseLost matchable apart from other store failures.
func (s *idemCall[T]) renew() error {
	ctx, cancel := s.storeCtx(false)
	defer cancel()
	return s.renewIn(ctx)
}

// renewIn renews the claim with ctx, which bounds the store call.
func (s *idemCall[T]) renewIn(ctx context.Context) error {
	at := s.cfg.clockNow()
	err := s.ic.store.Renew(ctx, s.key, s.token, s.ic.lease)
	if err == nil {
		s.held = at
		return nil
	}
	if !errors.Is(err, ErrLeaseLost) {
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
func (s *idemCall[T]) complete(rec StoredOutcome) error {
	retention := s.ic.retention
	lease := s.ic.lease
	detached := context.WithoutCancel(s.ctx)
	end := s.cfg.clockNow().Add(lease)
	bound := func() time.Time { return minTime(end, s.leaseEnd()) }
	var timer waitTimer
	defer timer.stop(s.cfg.clock)
	var lastErr error
	reclaimed := false
	for backoff := minRecordBackoff; ; backoff = min(2*backoff, maxRecordBackoff) {
		if !s.cfg.clockNow().Before(bound()) {
			break
		}
		ctx, cancel := s.storeCtxUntil(detached, bound())
		err := s.ic.store.Complete(ctx, s.key, s.token, rec, retention)
		cancel()
		if err == nil {
			s.token = ""
			return nil
		}
		if errors.Is(err, ErrLeaseLost) {
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
		if !s.cfg.clockNow().Add(backoff).Before(bound()) {
			break
		}
		sleepDetached(s.cfg, &timer, backoff)
		ctx, cancel = s.storeCtxUntil(detached, bound())
		err = s.renewIn(ctx)
		cancel()
		if errors.Is(err, ErrLeaseLost) {
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

// errLeaseEnding is why an outcome was not recorded when no try was left
// before the claim's lease could run out.
var errLeaseEnding = errors.New("the claim's lease was about to run out")

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// recordedEarlier looks the key up after a lost lease, when an earlier try
// to record may have been stored after all. While the claim's lease still
// runs (before bound) no other caller can have completed the key, so a
// completed key with this call's fingerprint is this call's outcome. A
// lookup that fails is retried with backoff until bound, like the record
// itself. A key the store lost altogether is claimed again (s.token is then
// the new claim) so the outcome can still be recorded.
func (s *idemCall[T]) recordedEarlier(parent context.Context, bound time.Time, timer *waitTimer) bool {
	s.token = ""
	for backoff := minRecordBackoff; s.cfg.clockNow().Before(bound); backoff = min(2*backoff, maxRecordBackoff) {
		at := s.cfg.clockNow()
		ctx, cancel := s.storeCtxUntil(parent, bound)
		cl, err := s.ic.store.Claim(ctx, s.key, s.fp, s.ic.lease)
		cancel()
		switch {
		case err == nil && cl.Status == ClaimCompleted:
			return cl.Fingerprint == s.fp
		case err == nil && cl.Status == ClaimAcquired && cl.Token != "":
			s.token, s.held = cl.Token, at
			return false
		case err == nil:
			return false // held by another caller: the lease was lost
		}
		if !s.cfg.clockNow().Add(backoff).Before(bound) {
			return false
		}
		sleepDetached(s.cfg, timer, backoff)
	}
	return false
}

func (s *idemCall[T]) notRecorded(err error) error {
	s.token = ""
	return &outcomeNotRecordedError{err: err}
}

// outcomeNotRecordedError reports work that ran but whose outcome the store does
// not keep.
type outcomeNotRecordedError struct{ err error }

func (e *outcomeNotRecordedError) Error() string {
	return "retry: the work ran but its outcome is not recorded in the idempotency store: " + errorText(e.err)
}

// Is matches ErrOutcomeNotRecorded only: fn ran, so the error must not
// read as ErrIdempotencyUnavailable, which says it did not.
func (e *outcomeNotRecordedError) Is(target error) bool {
	return target == ErrOutcomeNotRecorded
}

func (e *outcomeNotRecordedError) Unwrap() error { return e.err }

// errTakenOver is the error of a call whose claim was lost while it waited
// between attempts: another caller may have taken the key over and run
// the work.
var errTakenOver = fmt.Errorf("%w; another caller may have taken the key over", ErrLeaseLost)

// notFailedWork says whether a call whose last attempt ended with err
// failed without its work failing: it found another caller holding the
// key, lost its claim to one, replayed a stored outcome, or ran fn
// successfully without its outcome being recorded. Such calls are not
// dead-lettered: a redrive would repeat work that did not fail, or that
// another caller owns. It looks into an inner Do's *Error too: an outer
// call whose fn returned an inner idempotent call's replay is one.
func notFailedWork(err error) bool {
	return walkThrough(err, func(err error) bool {
		switch e := err.(type) {
		case *replayedError, *outcomeNotRecordedError:
			return true
		case *codecError:
			return e.op == "encoded"
		}
		return err == errHeld || err == errTakenOver
	}) != nil
}

// replayedFailure says whether err is a failure replayed from the store
// (a notFailedWork case that Retrier.ForRedrive dead-letters all the
// same), by this call or an inner Do.
func replayedFailure(err error) bool {
	return walkThrough(err, func(err error) bool {
		_, ok := err.(*replayedError)
		return ok
	}) != nil
}

// codecError reports a value the codec could not encode or decode. Its text
// names the codec error's type only, since the error's own text may quote
// the value; errors.As and errors.Is still reach it.
type codecError struct {
	op  string // "encoded" or "decoded"
	err error
}

func (e *codecError) Error() string {
	if e.err == errCodecPanicked {
		return "retry: fn succeeded but the idempotency codec panicked encoding its value"
	}
	if e.op == "encoded" {
		return fmt.Sprintf("retry: fn succeeded but its value could not be encoded by the idempotency codec (%T)", e.err)
	}
	return fmt.Sprintf("retry: the stored value could not be decoded by the idempotency codec (%T)", e.err)
}

func (e *codecError) Unwrap() error { return e.err }

// release frees the key; if it fails, the claim lapses with its lease.
func (s *idemCall[T]) release() {
	ctx, cancel := s.storeCtx(true)
	defer cancel()
	_ = s.ic.store.Release(ctx, s.key, s.token)
	s.token = ""
}

// fingerprint identifies a payload: the hex SHA-256 of p, or "" for none.
func fingerprint(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	sum := sha256.Sum256(p)
	return hex.EncodeToString(sum[:])
}
