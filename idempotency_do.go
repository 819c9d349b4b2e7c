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
var errHeld error = &wrapped{msg: ErrInProgress.Error(), err: ErrInProgress}

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

	token   string // the claim this call holds; "" when none
	fresh   bool   // the claim was taken just before attempt 1: no renewal then
	pending bool   // another caller held the key at the last look
	first   bool   // that look was made before the loop, for attempt 1
	open    bool   // the store failed and fail-open is on: run unprotected
	fromFn  bool   // the last attempt's result came from fn
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
	if ic.wait {
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
		v, err := s.replay(cl.Record)
		if err != nil {
			return zero, s.doneEarly(OutcomePermanent, err)
		}
		return v, s.doneEarly(OutcomeSuccess, nil)
	case cl.Status == ClaimHeld:
		s.pending, s.first = true, true
	default:
		s.token, s.fresh = cl.Token, true
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
	if c.idem == nil || c.idem.store == nil {
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
				return s.replay(cl.Record)
			case cl.Status == ClaimHeld:
				return zero, errHeld
			default:
				s.pending, s.token = false, cl.Token
			}
		case s.fresh:
			s.fresh = false
		default:
			if err := s.renew(); err != nil {
				switch {
				case errors.Is(err, ErrLeaseLost):
					s.token = "" // nothing left to release
					return zero, Permanent(fmt.Errorf("%w: key %q; another caller may have taken it over", ErrLeaseLost, s.key))
				case s.ctx.Err() != nil:
					return zero, s.ctx.Err()
				case !s.ic.failOpen:
					return zero, Permanent(err)
				}
			}
		}
		s.fromFn = true
		return fn(ctx)
	}
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
			return cl, err, c.stop(OutcomeMaxElapsed, ErrMaxElapsed, nil, false)
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

// finish stores a final outcome, or releases the claim, and returns what
// Do returns.
func (s *idemCall[T]) finish(v T, err error) (T, error) {
	if s.token == "" {
		return v, err // no claim: replayed, lease lost, or fail-open
	}
	var e *Error
	switch {
	case err == nil:
		b, encErr := s.encode(v)
		if encErr != nil {
			// fn's side effect happened: record a failure rather than
			// let the next call repeat it.
			encErr = fmt.Errorf("retry: idempotency key %q: fn succeeded but its value could not be encoded: %w", s.key, encErr)
			s.complete(Record{Permanent: true, Error: encErr.Error()})
			return v, encErr
		}
		s.complete(Record{Value: b})
	case s.fromFn && errors.As(err, &e) && s.final(e):
		s.complete(Record{Permanent: true, Error: e.Last.Error()})
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
func (s *idemCall[T]) replay(rec Record) (T, error) {
	var v T
	if rec.Permanent {
		return v, Permanent(&replayedError{msg: rec.Error})
	}
	if _, isDo := any(v).(struct{}); isDo {
		return v, nil
	}
	if err := s.codec().Unmarshal(rec.Value, &v); err != nil {
		var zero T
		return zero, Permanent(fmt.Errorf("retry: idempotency key %q: the stored value could not be decoded: %w", s.key, err))
	}
	return v, nil
}

func (s *idemCall[T]) encode(v T) ([]byte, error) {
	if _, isDo := any(v).(struct{}); isDo {
		return nil, nil
	}
	return s.codec().Marshal(v)
}

func (s *idemCall[T]) codec() Codec {
	if s.ic.codec == nil {
		return JSONCodec{}
	}
	return s.ic.codec
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
	if errors.Is(err, ErrReplayed) {
		cfg := *s.cfg
		cfg.dl = nil
		c.cfg = &cfg
	}
	return c.end(&Error{Outcome: o, Last: err}, false)
}

func (s *idemCall[T]) keyReuse() error {
	return fmt.Errorf("%w: key %q", ErrKeyReuse, s.key)
}

// storeCtx bounds a store call. Complete and Release are detached from
// the caller's cancellation: a caller that gave up must still record or
// free the key.
func (s *idemCall[T]) storeCtx(detached bool) (context.Context, context.CancelFunc) {
	parent := s.ctx
	if detached {
		parent = context.WithoutCancel(parent)
	}
	d := s.ic.storeTimeout
	if d == 0 {
		d = DefaultIdempotencyStoreTimeout
	}
	return context.WithTimeout(parent, d)
}

func (s *idemCall[T]) unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s %q: %w", ErrIdempotencyUnavailable, op, s.key, err)
}

func (s *idemCall[T]) claim() (Claim, error) {
	ctx, cancel := s.storeCtx(false)
	defer cancel()
	cl, err := s.ic.store.Claim(ctx, s.key, s.fp, s.ic.leaseOrDefault())
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
	err := s.ic.store.Renew(ctx, s.key, s.token, s.ic.leaseOrDefault())
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		return s.unavailable("renew", err)
	}
	return err
}

// complete stores rec. Its failure is not reported: fn's outcome is what
// the caller needs, and the claim then lapses with its lease.
func (s *idemCall[T]) complete(rec Record) {
	ctx, cancel := s.storeCtx(true)
	defer cancel()
	retention := s.ic.retention
	if retention == 0 {
		retention = DefaultIdempotencyRetention
	}
	_ = s.ic.store.Complete(ctx, s.key, s.token, rec, retention)
	s.token = ""
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
