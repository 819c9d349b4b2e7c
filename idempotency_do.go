package retry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// errHeld is what an attempt returns when another caller holds the key.
// It is its own value, not ErrInProgress itself, so that Do can retry it
// whatever WithRetryIf says without also retrying an ErrInProgress that
// fn returns (from an inner Do).
var errHeld error = &wrapped{msg: "retry: idempotency key held by another caller; its outcome is not known yet", err: ErrInProgress}

// minHolderPoll keeps a waiting caller from spinning on the store when
// the backoff schedule says not to wait at all.
const minHolderPoll = time.Millisecond

// idemCall is the state of one idempotent call of Do.
type idemCall[T any] struct {
	cfg   *config
	ic    *idemConfig
	ctx   context.Context
	key   string
	fp    string
	start time.Time // the call's start, read when config.needsStart

	token   string    // the claim this call holds; "" when none
	held    time.Time // when the claim was last taken or renewed, read before the store call
	looked  time.Time // when the last Claim was sent
	fresh   bool      // the claim was taken just before attempt 1: no renewal then
	pending bool      // another caller held the key at the last look
	first   bool      // that look was made before the loop, for attempt 1
	open    bool      // the store failed and fail-open is on: run unprotected
	fromFn  bool      // the last attempt's result came from fn

	// ran is set when fn succeeded but its outcome could not be
	// recorded as such (the store failed, or the value could not be
	// encoded): the loop then ends with an error, and DoValue still
	// returns value.
	ran   bool
	value T
}

// runIdempotent is Do with an idempotency store: it looks the key up,
// then runs the shared loop with an attempt function that claims, renews
// and calls fn, and finally stores or releases the outcome.
func runIdempotent[T any](ctx context.Context, cfg *config, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	ic := cfg.idem
	key := cfg.idempotencyKey(ctx)
	if p := idemKeyProblem(key); p != "" {
		return zero, fmt.Errorf("%w: %s", ErrInvalidOption, p)
	}
	if ctx.Err() != nil {
		return loop(ctx, cfg, fn, nil, time.Time{}) // stops before the first attempt
	}
	s := &idemCall[T]{cfg: cfg, ic: ic, ctx: ctx, key: key, fp: fingerprint(cfg.payload)}
	if cfg.needsStart() {
		// Before the first look at the store: the claim and any wait for
		// another holder are part of the call's time and its budget.
		s.start = cfg.now()
	}
	// A panic in fn (or anywhere below) must not leave the key claimed
	// until the lease runs out. No recover: the panic keeps its stack.
	defer func() {
		if s.token != "" {
			s.release()
		}
	}()

	lcfg := *cfg
	cl, err := s.claim()
	if !ic.noWait {
		var stop error
		if cl, err, stop = s.waitForHolder(cl, err); stop != nil {
			return zero, stop
		}
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return loop(ctx, cfg, fn, nil, s.start)
	case err != nil && !ic.failOpen:
		return zero, s.doneEarly(OutcomePermanent, err)
	case err != nil:
		s.open = true
	case cl.Status != ClaimAcquired && cl.Fingerprint != s.fp:
		return zero, s.doneEarly(OutcomePermanent, s.keyReuse())
	case cl.Status == ClaimCompleted:
		v, err := s.replay(cl.Outcome)
		if err != nil {
			return zero, s.doneEarly(OutcomePermanent, err)
		}
		return v, s.doneEarly(OutcomeSuccess, nil)
	case cl.Status == ClaimHeld:
		s.pending, s.first = true, true
	default:
		s.token, s.fresh, s.held = cl.Token, true, s.looked
	}

	if retryIf := lcfg.retryIf; retryIf != nil {
		lcfg.retryIf = func(err error) bool { return err == errHeld || retryIf(err) }
	}
	v, err := loop(ctx, &lcfg, s.attempt(fn), nil, s.start)
	return s.finish(v, err)
}

// idempotencyKey returns the call's idempotency key: the context's, else
// the option's ("" when the call is not idempotent).
func (c *config) idempotencyKey(ctx context.Context) string {
	if c.idem == nil {
		return ""
	}
	if k, ok := IdempotencyKeyFromContext(ctx); ok {
		return k
	}
	return c.idem.key
}

// attempt wraps fn: it looks the key up again while another caller holds
// it, renews the claim before each later attempt, and calls fn only while
// the call holds the key (or runs fail-open).
func (s *idemCall[T]) attempt(fn func(context.Context) (T, error)) func(context.Context) (T, error) {
	return func(ctx context.Context) (T, error) {
		var zero T
		s.fromFn = false
		switch {
		case s.open:
		case s.pending && s.first:
			s.first = false
			return zero, errHeld
		case s.pending:
			cl, err := s.claim()
			switch {
			case err != nil && s.ctx.Err() != nil:
				return zero, s.ctx.Err()
			case err != nil && !s.ic.failOpen:
				return zero, Permanent(err)
			case err != nil:
				s.open = true
			case cl.Status != ClaimAcquired && cl.Fingerprint != s.fp:
				return zero, Permanent(s.keyReuse())
			case cl.Status == ClaimCompleted:
				s.pending = false
				return s.replay(cl.Outcome)
			case cl.Status == ClaimHeld:
				return zero, errHeld
			default:
				s.pending, s.token, s.held = false, cl.Token, s.looked
			}
		case s.fresh:
			s.fresh = false
		default:
			if err := s.renew(); err != nil {
				switch {
				case errors.Is(err, ErrLeaseLost):
					s.token = "" // nothing left to release
					return zero, Permanent(fmt.Errorf("%w; another caller may have taken the key over", ErrLeaseLost))
				case s.ctx.Err() != nil:
					return zero, s.ctx.Err()
				case !s.ic.failOpen:
					return zero, Permanent(err)
				}
			}
		}
		s.fromFn = true
		v, err := fn(ctx)
		if err != nil || s.token == "" {
			return v, err
		}
		// Record the success before the loop reports it, so that a
		// success Do returns is always one the store keeps.
		if err := s.recordSuccess(v); err != nil {
			s.value, s.ran = v, true
			return zero, Permanent(err)
		}
		return v, nil
	}
}

// recordSuccess stores v as the key's outcome. When v cannot be encoded,
// fn's side effect has happened all the same: it records a permanent
// failure instead, so that the next call does not repeat the work, and
// reports the encoding error.
func (s *idemCall[T]) recordSuccess(v T) error {
	b, err := s.encode(v)
	if err != nil {
		encErr := &codecError{op: "encoded", err: err}
		if err := s.complete(StoredOutcome{Permanent: true, Error: encErr.Error()}); err != nil {
			return err
		}
		return encErr
	}
	return s.complete(StoredOutcome{Value: b})
}

// waitForHolder looks the key up again after each wait of the backoff
// schedule while another caller holds it with the same fingerprint. It
// returns the last look, or stop when the call must end (context, its
// deadline, or the time budget, which counts from the call's start).
func (s *idemCall[T]) waitForHolder(cl Claim, err error) (Claim, error, error) {
	if err != nil || cl.Status != ClaimHeld || cl.Fingerprint != s.fp {
		return cl, err, nil
	}
	cfg := s.cfg
	c := call{cfg: cfg, ctx: s.ctx, start: s.start, last: errHeld}
	for n := 1; err == nil && cl.Status == ClaimHeld && cl.Fingerprint == s.fp; n++ {
		d := max(cfg.wait(n, c.prevWait, 0, false), minHolderPoll)
		if cfg.maxElapsed > 0 && d >= cfg.maxElapsed-cfg.now().Sub(c.start) {
			return cl, err, c.stop(OutcomeMaxElapsed, ErrExhausted, nil, false)
		}
		if deadline, ok := s.ctx.Deadline(); ok && d >= cfg.until(deadline) {
			return cl, err, c.stopBeforeDeadline()
		}
		c.prevWait = d
		if !c.sleep(d) {
			return cl, err, c.stopForContext(true)
		}
		cl, err = s.claim()
	}
	c.timer.stop()
	return cl, err, nil
}

// finish stores a final failure, or releases the claim, and returns what
// Do returns. A success was recorded by the attempt that had it.
func (s *idemCall[T]) finish(v T, err error) (T, error) {
	var e *Error
	switch {
	case s.ran:
		return s.value, err
	case err == nil:
	case s.token == "":
		// No claim: replayed, lease lost, fail-open, or recorded.
	case s.fromFn && errors.As(err, &e) && s.final(e):
		// If this is not recorded, the next call runs fn again: after a
		// failure that is a retry, not a duplicate side effect.
		_ = s.complete(StoredOutcome{Permanent: true, Error: e.Last.Error()})
	default:
		s.release()
	}
	return v, err
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
		return v, Permanent(&replayedError{msg: rec.Error})
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

// doneEarly reports a call that ended before the loop, with no attempt.
// A failure takes the same path as one after attempts: an *Error whose
// Last is err, a dead letter if configured, then OnDone. A replayed
// permanent failure is not dead-lettered again: the call that failed
// recorded it already.
func (s *idemCall[T]) doneEarly(o Outcome, err error) error {
	c := call{cfg: s.cfg, ctx: s.ctx, start: s.start, last: err}
	if o == OutcomeSuccess {
		if obs := s.cfg.observer; obs != nil {
			obs.OnDone(s.ctx, Done{Name: s.cfg.name, Outcome: o, Elapsed: s.cfg.now().Sub(s.start)})
		}
		return nil
	}
	return c.end(&Error{Outcome: o, Last: err}, false)
}

func (s *idemCall[T]) keyReuse() error {
	return ErrKeyReuse
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
	d := s.ic.storeTimeout
	if s.cfg.clock != nil {
		return s.cfg.clock.WithTimeout(parent, d)
	}
	return context.WithTimeout(parent, d)
}

// unavailable reports a store failure. The key is left out of the text on
// purpose: keys often carry customer or order IDs.
func (s *idemCall[T]) unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrIdempotencyUnavailable, op, err)
}

func (s *idemCall[T]) claim() (Claim, error) {
	s.looked = s.cfg.now()
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
	return s.renewWith(s.ctx)
}

func (s *idemCall[T]) renewWith(parent context.Context) error {
	at := s.cfg.now()
	ctx, cancel := s.storeCtxFrom(parent)
	defer cancel()
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
// over meanwhile, until one lease has passed since the claim was last
// confirmed before fn's end: past that the claim may be gone. A try that
// failed may still have been stored (its reply lost), so when a later try
// finds the lease lost, complete looks the key up before it gives up. It
// returns nil once rec is stored, else an error matching
// ErrOutcomeNotRecorded and ErrIdempotencyUnavailable. The claim is the
// store's again afterwards either way: it is not released, so that no
// other caller runs the work before the lease ends.
func (s *idemCall[T]) complete(rec StoredOutcome) error {
	retention := s.ic.retention
	lease := s.ic.lease
	detached := context.WithoutCancel(s.ctx)
	// Until a renewal succeeds, the claim is safe one lease after it was
	// last confirmed; after one, the tries end one lease after fn did.
	end := s.cfg.now().Add(lease)
	bound := s.held.Add(lease)
	var timer waitTimer
	defer timer.stop()
	var lastErr error
	for backoff := minRecordBackoff; ; backoff = min(2*backoff, maxRecordBackoff) {
		ctx, cancel := s.storeCtxFrom(detached)
		err := s.ic.store.Complete(ctx, s.key, s.token, rec, retention)
		cancel()
		if err == nil {
			s.token = ""
			return nil
		}
		if errors.Is(err, ErrLeaseLost) {
			if lastErr != nil && s.recordedEarlier(detached, bound, &timer) {
				return nil
			}
			if s.token != "" { // a new claim, taken by recordedEarlier
				continue
			}
			return s.notRecorded(err)
		}
		lastErr = err
		if !s.cfg.now().Add(backoff).Before(bound) {
			break
		}
		sleepDetached(s.cfg, &timer, backoff)
		switch err := s.renewWith(detached); {
		case err == nil:
			bound = end
		case errors.Is(err, ErrLeaseLost):
			if s.recordedEarlier(detached, bound, &timer) {
				return nil
			}
			if s.token == "" {
				return s.notRecorded(err)
			}
		}
	}
	s.token = ""
	return s.notRecorded(lastErr)
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
	for backoff := minRecordBackoff; s.cfg.now().Before(bound); backoff = min(2*backoff, maxRecordBackoff) {
		at := s.cfg.now()
		ctx, cancel := s.storeCtxFrom(parent)
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
		if !s.cfg.now().Add(backoff).Before(bound) {
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
	return "retry: the work ran but its outcome is not recorded in the idempotency store: " + e.err.Error()
}

func (e *outcomeNotRecordedError) Is(target error) bool {
	return target == ErrOutcomeNotRecorded || target == ErrIdempotencyUnavailable
}

func (e *outcomeNotRecordedError) Unwrap() error { return e.err }

// notFailedWork says whether a call whose last attempt ended with err
// failed without its work failing: it found another caller holding the
// key, replayed a stored outcome, or ran fn successfully without its
// outcome being recorded. Such calls are not dead-lettered: a redrive
// would repeat work that did not fail, or that another caller owns. It
// does not look into an inner Do's *Error.
func notFailedWork(err error) bool {
	return walk(err, func(err error) bool {
		switch e := err.(type) {
		case *replayedError, *outcomeNotRecordedError:
			return true
		case *codecError:
			return e.op == "encoded"
		}
		return err == errHeld
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
	if e.op == "encoded" {
		return fmt.Sprintf("retry: fn succeeded but its value could not be encoded by the idempotency codec (%T)", e.err)
	}
	return fmt.Sprintf("retry: the stored value could not be decoded by the idempotency codec (%T)", e.err)
}

func (e *codecError) Unwrap() error { return e.err }

// sleepDetached waits d on the Retrier's clock whatever the caller's
// context says: the outcome must be recorded even if the caller left.
func sleepDetached(cfg *config, t *waitTimer, d time.Duration) {
	ch := t.arm(cfg.clock, d)
	if cfg.waitArmed != nil {
		cfg.waitArmed(d)
	}
	<-ch
}

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
