package retry

import "time"

// Defaults of idempotent calls, used when the option is not given.
const (
	// DefaultIdempotencyLease is how long a claim on a key lasts before
	// another caller may take it over; Do renews it before each attempt.
	DefaultIdempotencyLease = 30 * time.Second
	// DefaultIdempotencyRetention is how long a final outcome is kept
	// and replayed, as Stripe does.
	DefaultIdempotencyRetention = 24 * time.Hour
	// DefaultIdempotencyStoreTimeout bounds each call to the store, so
	// that a hanging store cannot hang the caller.
	DefaultIdempotencyStoreTimeout = 5 * time.Second
)

// idemConfig holds the idempotency options. Options replace the pointer
// rather than write through it, because Retrier.With copies the config
// and must not change the Retrier it started from.
type idemConfig struct {
	store        IdempotencyStore
	key          string
	lease        time.Duration
	retention    time.Duration
	storeTimeout time.Duration
	codec        Codec
	noWait       bool // fail attempts with ErrInProgress instead of waiting for the holder
	failOpen     bool
	keepFailures bool
	tunedBy      string // the first option that tunes a store, named when none is given
}

// setIdem applies f to a copy of the idempotency settings.
func (c *config) setIdem(f func(*idemConfig)) {
	var n idemConfig
	if c.idem != nil {
		n = *c.idem
	}
	f(&n)
	c.idem = &n
}

// tuneIdem is setIdem for the options that only tune WithIdempotency.
func (c *config) tuneIdem(option string, f func(*idemConfig)) {
	c.setIdem(func(ic *idemConfig) {
		if ic.tunedBy == "" {
			ic.tunedBy = option
		}
		f(ic)
	})
}

// checkIdem validates what only the options together can tell, once they
// are all applied.
func (c *config) checkIdem() {
	if c.idem != nil && c.idem.store == nil && c.idem.tunedBy != "" {
		c.fail("%s without WithIdempotency: it has no effect without a store; add WithIdempotency(store, key) or drop it", c.idem.tunedBy)
		return
	}
	if c.idem == nil || c.idem.store == nil || c.attemptTimeout <= 0 {
		return
	}
	if lease := c.idem.leaseOrDefault(); lease <= c.attemptTimeout {
		c.fail("the idempotency lease (%v) must be longer than WithAttemptTimeout (%v), or a running attempt could lose its claim; raise it with WithIdempotencyLease", lease, c.attemptTimeout)
	}
}

func (ic *idemConfig) leaseOrDefault() time.Duration {
	if ic.lease == 0 {
		return DefaultIdempotencyLease
	}
	return ic.lease
}

// WithIdempotency makes every call run at most once per key, across
// attempts, callers and processes sharing store: modelled on Stripe's
// idempotency keys and the IETF Idempotency-Key draft.
//
// Before the first attempt Do claims key in store with a lease
// ([WithIdempotencyLease]) and renews it before each later attempt; all
// attempts of one call share the claim. Then:
//   - A key already completed: fn is not called. Do returns nil and
//     DoValue the stored value, decoded by the [Codec]; a stored permanent
//     failure is replayed as an [*Error] with [OutcomePermanent], the
//     original message, and a chain matching [ErrReplayed].
//   - A key held by another caller: the caller waits for the holder's
//     outcome without spending attempts (see [WithIdempotencyWait]), then
//     replays it, or claims the key if the holder released it. A call that
//     ends while another caller holds the key (its context, or its
//     attempts with WithIdempotencyWait(false)) matches [ErrInProgress]
//     and is not dead-lettered: the work is not known to have failed.
//   - Success and permanent failure are stored as final for the retention
//     TTL ([WithIdempotencyRetention]). A success is stored before Do
//     returns it: a nil from Do means the store keeps the outcome, so no
//     later call with the key runs fn again within the retention.
//     Exhaustion, the time budget, and a done context release the claim
//     so that a later call runs again (see [WithIdempotencyKeepFailures]).
//   - Recording the outcome fails: Do retries the store (10ms backoff
//     doubling to 1s, renewing the claim between tries, each try bounded
//     by [WithIdempotencyStoreTimeout]) for at most one lease after fn
//     returned, while the claim is surely held. If it still fails, Do
//     returns an error matching [ErrOutcomeNotRecorded] and
//     [ErrIdempotencyUnavailable], permanent to an outer Do, and DoValue
//     the value. The caller can then rely on this: fn ran and succeeded
//     once; the claim is not released, so no other caller runs fn before
//     the lease ends; after it, a call with the key may run fn again,
//     so keep or report the result yourself (do not acknowledge a queue
//     message blindly). The call is not dead-lettered.
//   - The key used with another payload ([WithPayload], compared by its
//     SHA-256): [ErrKeyReuse], fn not called.
//   - A store that fails or times out ([WithIdempotencyStoreTimeout]):
//     [ErrIdempotencyUnavailable], fn not called, unless
//     [WithIdempotencyFailOpen].
//   - fn panics: the claim is released, then the panic goes on.
//
// The WithIdempotency... options below only tune this one: given without
// it (in New, or in [Retrier.With] on a Retrier without it), each is
// reported as an error wrapping [ErrInvalidOption], whatever the order.
//
// key may be "" when each call brings its own with
// [ContextWithIdempotencyKey], which overrides key. A key must not be
// longer than [MaxIdempotencyKeyLen] bytes; see there for scoping keys.
// store must not be nil, nor hold a nil pointer. Default: no idempotency.
func WithIdempotency(store IdempotencyStore, key string) Option {
	return func(c *config) {
		if s, isNil := nilArg(store); isNil {
			// The key is an identifier: it stays out of the error text.
			c.fail("WithIdempotency(%s, key): the store must not be nil", s)
			return
		}
		if p := idemKeyProblem(key); key != "" && p != "" {
			c.fail("WithIdempotency: %s", p)
			return
		}
		c.setIdem(func(ic *idemConfig) { ic.store, ic.key = store, key })
	}
}

// WithIdempotencyLease sets how long a claim lasts without renewal before
// another caller may take the key over (after a crash, say). It must be
// longer than any attempt: New rejects a lease not longer than
// [WithAttemptTimeout]. Do renews it before each attempt, so it should
// also cover the longest wait between attempts (the backoff's max, or
// [WithMaxDelay]); if it runs out during a wait and another caller takes
// over, Do stops with [ErrLeaseLost] without calling fn again. d must be
// positive. Default: [DefaultIdempotencyLease].
// Needs [WithIdempotency].
func WithIdempotencyLease(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("WithIdempotencyLease(%v): the lease must be positive", d)
			return
		}
		c.tuneIdem("WithIdempotencyLease", func(ic *idemConfig) { ic.lease = d })
	}
}

// WithIdempotencyRetention sets how long a final outcome is kept and
// replayed; after it, a call with the same key runs again. d must be
// positive. Default: [DefaultIdempotencyRetention].
// Needs [WithIdempotency].
func WithIdempotencyRetention(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("WithIdempotencyRetention(%v): the retention must be positive", d)
			return
		}
		c.tuneIdem("WithIdempotencyRetention", func(ic *idemConfig) { ic.retention = d })
	}
}

// WithIdempotencyStoreTimeout bounds each call to the store, on the
// Retrier's clock ([WithClock]). A call that takes longer counts as a
// store failure. d must be positive. Default:
// [DefaultIdempotencyStoreTimeout].
// Needs [WithIdempotency].
func WithIdempotencyStoreTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("WithIdempotencyStoreTimeout(%v): the timeout must be positive", d)
			return
		}
		c.tuneIdem("WithIdempotencyStoreTimeout", func(ic *idemConfig) { ic.storeTimeout = d })
	}
}

// WithIdempotencyWait sets whether a caller that finds its key held by
// another waits for the holder's outcome. A waiting caller looks again
// after each wait of the backoff schedule (at least 1ms apart), spending no
// attempts, until the holder completes (the outcome is replayed), releases
// or lets its lease run out (the caller claims and runs fn), or the
// context, its deadline or the [WithMaxElapsed] budget ends the call.
// With false, finding the key held fails the attempt with [ErrInProgress]
// instead, which Do retries (backing off as configured) whatever
// [WithRetryIf] says, spending attempts. Default: true.
// Needs [WithIdempotency].
func WithIdempotencyWait(wait bool) Option {
	return func(c *config) { c.tuneIdem("WithIdempotencyWait", func(ic *idemConfig) { ic.noWait = !wait }) }
}

// WithIdempotencyFailOpen sets whether Do calls fn without idempotency
// when the store fails or times out, instead of failing closed with
// [ErrIdempotencyUnavailable]: availability over exactly-once. Use it only
// where a duplicate side effect is acceptable. Default: false.
// Needs [WithIdempotency].
func WithIdempotencyFailOpen(open bool) Option {
	return func(c *config) { c.tuneIdem("WithIdempotencyFailOpen", func(ic *idemConfig) { ic.failOpen = open }) }
}

// WithIdempotencyKeepFailures sets whether exhaustion ([OutcomeExhausted]
// and [OutcomeMaxElapsed]) is stored as a final outcome, replayed as a
// permanent failure, as Stripe does with 500s, instead of releasing the
// claim. A done context still releases it: the caller left, the work did
// not end. Default: false.
// Needs [WithIdempotency].
func WithIdempotencyKeepFailures(keep bool) Option {
	return func(c *config) {
		c.tuneIdem("WithIdempotencyKeepFailures", func(ic *idemConfig) { ic.keepFailures = keep })
	}
}

// WithIdempotencyCodec sets how DoValue values are stored and replayed.
// When a value cannot be encoded, fn has already run: DoValue returns the
// value with an error, and the key is completed as a permanent failure so
// that the work is not repeated. Do stores no value. codec must not be
// nil, nor hold a nil pointer. Default: [JSONCodec].
// Needs [WithIdempotency].
func WithIdempotencyCodec(codec Codec) Option {
	return func(c *config) {
		if s, isNil := nilArg(codec); isNil {
			c.fail("WithIdempotencyCodec(%s): the codec must not be nil", s)
			return
		}
		c.tuneIdem("WithIdempotencyCodec", func(ic *idemConfig) { ic.codec = codec })
	}
}
