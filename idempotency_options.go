package retry

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/internal/clocks"
)

// Defaults of idempotent calls, used for zero fields of
// IdempotencyOptions.
const (
	defaultLease        = 30 * time.Second
	defaultRetention    = 24 * time.Hour // as Stripe keeps keys
	defaultStoreTimeout = 5 * time.Second
	// maxKeyLen is the longest key, in bytes, as Stripe and the IETF
	// Idempotency-Key draft use.
	maxKeyLen = 255
	// minLease is the shortest lease: a store round trip must fit in a
	// third of it many times over (a lease of 30ns is 30s mistyped).
	minLease = 100 * time.Millisecond
)

// IdempotencyOptions tunes [WithIdempotency]. The zero value, or a nil
// *IdempotencyOptions, gives the defaults; zero means the default in every
// field.
type IdempotencyOptions struct {
	// Key is the idempotency key of every call, 1 to 255 bytes, global
	// within a store; "" when each call brings its own. A key from
	// [ContextWithIdempotencyKey] overrides it, except one inherited from
	// an enclosing idempotent call. Prefix keys with the operation
	// ("charge:"+orderID) and, for keys from clients, the client's
	// identity, so that no client can replay another's outcome.
	Key string
	// Lease is how long a claim lasts without renewal before another
	// caller may take the key over, measured on Do's clock from when the
	// claim or renewal was sent. Do renews it before each attempt and
	// every third of a lease while fn runs; if a renewal fails, fn's
	// context is cancelled a tenth of a lease before the end, and the
	// outcome is unknown. It should cover the longest wait: if another
	// caller takes over during one, Do stops with [idempotency.ErrLeaseLost], without
	// calling fn or dead-lettering. Keep the store's slowest round trip
	// under a tenth of it: a renewal must be answered well within the
	// third of a lease before the next. It must be at least 100ms and
	// longer than [WithAttemptTimeout]. Default: 30s.
	Lease time.Duration
	// Retention is how long a final outcome is kept and replayed; after
	// it, a call with the same key runs again. Default: 24h.
	Retention time.Duration
	// StoreTimeout bounds each call to the store, on the Retrier's clock;
	// a call that takes longer counts as a store failure. A store that
	// implements [idempotency.NonBlocking] (memstore) is called without
	// it, as its calls cannot take long. Default: 5s.
	StoreTimeout time.Duration
	// FailWhileHeld makes a caller that finds its key held fail the
	// attempt with [ErrInProgress], which Do retries (spending attempts)
	// whatever [WithRetryIf] says. Default: false: the caller looks again
	// after each wait of the backoff (at least 1ms apart), spending no
	// attempts, until the holder completes, releases or loses the key, or
	// the context, its deadline or [WithMaxElapsed] ends the call.
	FailWhileHeld bool
	// FailOpen makes Do call fn without idempotency when the store fails
	// or times out, instead of failing with [ErrIdempotencyUnavailable]:
	// only where a duplicate side effect is acceptable. Default: false.
	FailOpen bool
	// AtLeastOnce lets a later call run fn again once the lease of a call
	// with an unknown outcome ([ErrOutcomeUnknown]) has run out; fn should
	// pass the key downstream to deduplicate there. Default: false, at
	// most once: the unknown outcome is stored as final and replayed for
	// Retention as an error matching ErrOutcomeUnknown, and the call is
	// dead-lettered for someone to decide.
	AtLeastOnce bool
	// KeepFailures stores exhaustion ([OutcomeExhausted] and
	// [OutcomeMaxElapsed]) as a final outcome, replayed as a permanent
	// failure, as Stripe does with 500s, instead of releasing the claim.
	// A done context still releases it. Default: false.
	KeepFailures bool
	// Marshal and Unmarshal turn DoValue's values into the store's bytes
	// and back (Do stores none); Unmarshal gets exactly Marshal's bytes,
	// which may be the store's own (memstore's are): it must not modify
	// them, nor keep them past its return. Set both or neither, safe for
	// concurrent use. If a value cannot be encoded, fn has run: DoValue
	// returns the value with an error and the key is completed as a
	// permanent failure. Default: json.Marshal and json.Unmarshal (only
	// exported fields survive).
	Marshal   func(v any) ([]byte, error)
	Unmarshal func(data []byte, v any) error
}

// idemConfig holds the idempotency settings with their defaults resolved.
// WithIdempotency makes one; each Retrier built with it gets its own copy
// (config.derive), with the renewals of its calls' claims, and never
// changes it.
type idemConfig struct {
	store        idempotency.Store
	nonBlocking  bool             // store is an idempotency.NonBlocking: its calls need no timeout
	renewals     *clocks.Schedule // the Retrier's renewals of its calls' claims (renewer); set by derive
	key          string
	lease        time.Duration
	retention    time.Duration
	storeTimeout time.Duration
	marshal      func(any) ([]byte, error)
	unmarshal    func([]byte, any) error
	noWait       bool
	failOpen     bool
	keepFailures bool
	atLeastOnce  bool
}

// WithIdempotency makes every call run at most once per key, across
// attempts, callers and processes sharing store, after Stripe's
// idempotency keys and the IETF Idempotency-Key draft. opts may be nil for
// the defaults ([IdempotencyOptions]); store must not be nil, nor hold a
// nil pointer. Default: none. Idempotent calls and Keys in the package doc
// give the rules, and when a side effect can still happen twice.
func WithIdempotency(store idempotency.Store, opts *IdempotencyOptions) Option {
	var o IdempotencyOptions
	if opts != nil {
		o = *opts
	}
	if s, isNil := nilArg(store); isNil {
		// The key is an identifier: it stays out of the error text.
		return invalid("WithIdempotency(%s, opts): the store must not be nil", s)
	}
	if p := idemKeyProblem(o.Key); o.Key != "" && p != "" {
		return invalid("WithIdempotency: %s", p)
	}
	for _, d := range [...]struct {
		name string
		v    time.Duration
	}{{"Lease", o.Lease}, {"Retention", o.Retention}, {"StoreTimeout", o.StoreTimeout}} {
		if d.v < 0 {
			return invalid("WithIdempotency: IdempotencyOptions.%s is %v; it must not be negative (0 is the default)", d.name, d.v)
		}
	}
	if o.Lease > 0 && o.Lease < minLease {
		return invalid("WithIdempotency: IdempotencyOptions.Lease is %v; it must be at least %v, for a store round trip to fit in a third of it (0 is the default, %v)", o.Lease, minLease, defaultLease)
	}
	if (o.Marshal == nil) != (o.Unmarshal == nil) {
		return invalid("WithIdempotency: set both IdempotencyOptions.Marshal and Unmarshal, or neither")
	}
	ic := &idemConfig{
		store: store, key: o.Key,
		lease: or(o.Lease, defaultLease), retention: or(o.Retention, defaultRetention),
		storeTimeout: or(o.StoreTimeout, defaultStoreTimeout),
		marshal:      json.Marshal, unmarshal: json.Unmarshal,
		noWait: o.FailWhileHeld, failOpen: o.FailOpen, keepFailures: o.KeepFailures,
		atLeastOnce: o.AtLeastOnce,
	}
	_, ic.nonBlocking = store.(idempotency.NonBlocking)
	if o.Marshal != nil {
		ic.marshal, ic.unmarshal = o.Marshal, o.Unmarshal
	}
	return Option{set: setIdempotency, v: ic}
}

// forRetrier returns a copy of ic for a Retrier on clk, whose readings
// count from base, with renewals of its own: one allocation.
func (ic *idemConfig) forRetrier(clk clock.Clock, base time.Time) *idemConfig {
	b := &struct {
		ic idemConfig
		rs clocks.Schedule
	}{ic: *ic}
	b.rs.Init(clk, base)
	b.ic.renewals = &b.rs
	return &b.ic
}

// idemKeyProblem says what is wrong with key, or "" if nothing is.
func idemKeyProblem(key string) string {
	switch {
	case key == "":
		return "the idempotency key is empty; set IdempotencyOptions.Key or use ContextWithIdempotencyKey"
	case len(key) > maxKeyLen:
		return fmt.Sprintf("the idempotency key is %d bytes long; the limit is %d", len(key), maxKeyLen)
	}
	return ""
}
