package retry

import (
	"encoding/json"
	"fmt"
	"time"
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
)

// IdempotencyOptions tunes [WithIdempotency]. The zero value, or a nil
// *IdempotencyOptions, gives the defaults; zero means the default in every
// field.
type IdempotencyOptions struct {
	// Key is the idempotency key of every call; "" when each call brings
	// its own with [ContextWithIdempotencyKey], which overrides it (except
	// a context key that an enclosing idempotent call uses, inherited
	// through its fn's context: Key wins over that one). Keys
	// are 1 to 255 bytes and global within a store: prefix them with the
	// operation ("charge:"+orderID), and for keys that come from clients
	// with the client's identity too, so that one client cannot replay
	// another's outcome.
	Key string
	// Lease is how long a claim lasts without renewal before another
	// caller may take the key over (after a crash, say). Do renews it
	// before each attempt and, while fn runs, every third of a lease; if
	// a renewal fails, fn's context is cancelled a tenth of a lease
	// before the lease could run out, and the outcome is unknown (see
	// AtLeastOnce). It should cover the longest wait between attempts:
	// if it runs out during a wait and another caller takes over, Do
	// stops with [ErrLeaseLost] without calling fn again, and does not
	// dead-letter the call (the work is the other caller's). New rejects
	// a lease not longer than [WithAttemptTimeout]. Do measures it on its
	// clock from when it sent the claim or renewal, so the store's reply
	// time counts against it. Default: 30s.
	Lease time.Duration
	// Retention is how long a final outcome is kept and replayed; after
	// it, a call with the same key runs again. Default: 24h.
	Retention time.Duration
	// StoreTimeout bounds each call to the store, on the Retrier's clock
	// ([WithClock]); a call that takes longer counts as a store failure.
	// Default: 5s.
	StoreTimeout time.Duration
	// FailWhileHeld makes a caller that finds its key held by another
	// fail the attempt with [ErrInProgress], which Do retries (backing off
	// as configured, spending attempts) whatever [WithRetryIf] says,
	// instead of waiting for the holder's outcome. Default: false, wait:
	// the caller looks again after each wait of the backoff schedule (at
	// least 1ms apart), spending no attempts, until the holder completes
	// (its outcome is replayed), releases or lets its lease run out (the
	// caller claims and runs fn), or the context, its deadline or the
	// [WithMaxElapsed] budget ends the call.
	FailWhileHeld bool
	// FailOpen makes Do call fn without idempotency when the store fails
	// or times out, instead of failing closed with
	// [ErrIdempotencyUnavailable]: availability over exactly-once. Use it
	// only where a duplicate side effect is acceptable. Default: false.
	FailOpen bool
	// AtLeastOnce lets a later call with the key run fn again once the
	// lease of a call whose outcome is unknown ([ErrOutcomeUnknown]: its
	// context ended while fn ran) has run out. fn should then pass the
	// key downstream (retryhttp sends it as Idempotency-Key) so that the
	// downstream deduplicates. Default: false, at most once: the unknown
	// outcome is stored as final and replayed, for Retention, as an error
	// matching ErrOutcomeUnknown, so the work never runs twice (safe for
	// payments; the call is dead-lettered for someone to decide).
	AtLeastOnce bool
	// KeepFailures stores exhaustion ([OutcomeExhausted] and
	// [OutcomeMaxElapsed]) as a final outcome, replayed as a permanent
	// failure, as Stripe does with 500s, instead of releasing the claim.
	// A done context still releases it: the caller left, the work did
	// not end. Default: false.
	KeepFailures bool
	// Marshal and Unmarshal turn DoValue's values into the bytes the store
	// keeps, and back; Unmarshal gets exactly the bytes Marshal returned.
	// Set both or neither; they must be safe for concurrent use. When a
	// value cannot be encoded, fn has already run: DoValue returns the
	// value with an error, and the key is completed as a permanent failure
	// so that the work is not repeated. Do stores no value. Default:
	// json.Marshal and json.Unmarshal, so only exported fields survive a
	// replay.
	Marshal   func(v any) ([]byte, error)
	Unmarshal func(data []byte, v any) error
}

// idemConfig holds the idempotency settings with their defaults resolved.
// It is made once, by WithIdempotency, and never changed.
type idemConfig struct {
	store        IdempotencyStore
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

// checkIdem validates what only the options together can tell, once they
// are all applied.
func (c *config) checkIdem() {
	if c.idem == nil || c.attemptTimeout <= 0 {
		return
	}
	if c.idem.lease <= c.attemptTimeout {
		c.fail("the idempotency lease (%v) must be longer than WithAttemptTimeout (%v), or a running attempt could lose its claim; raise IdempotencyOptions.Lease", c.idem.lease, c.attemptTimeout)
	}
}

// WithIdempotency makes every call run at most once per key, across
// attempts, callers and processes sharing store: modelled on Stripe's
// idempotency keys and the IETF Idempotency-Key draft.
//
// Before the first attempt Do claims the key in store with a lease
// (IdempotencyOptions.Lease) and renews it before each later attempt; all
// attempts of one call share the claim. Then:
//   - A key already completed: fn is not called. Do returns nil and
//     DoValue the stored value, decoded by IdempotencyOptions.Unmarshal; a stored permanent
//     failure is replayed as an [*Error] with [OutcomePermanent], the
//     original message, and a chain matching [ErrReplayed].
//   - A key held by another caller: the caller waits for the holder's
//     outcome without spending attempts (see FailWhileHeld), then
//     replays it, or claims the key if the holder released it. A call that
//     ends while another caller holds the key (its context, or its
//     attempts with FailWhileHeld) matches [ErrInProgress]
//     and is not dead-lettered: the work is not known to have failed.
//   - Success and permanent failure are stored as final for the retention
//     TTL (Retention). A success is stored before Do
//     returns it: a nil from Do means the store keeps the outcome, so no
//     later call with the key runs fn again within the retention.
//     Exhaustion, the time budget, and a context that ended during a wait
//     release the claim so that a later call runs again (see
//     KeepFailures).
//   - The claim is renewed while fn runs (see Lease). A call whose
//     context ended while fn ran, or whose claim could not be renewed,
//     has an unknown outcome ([ErrOutcomeUnknown]): the claim is not
//     released, so no other caller runs fn before the lease ends; then,
//     by default, the outcome is stored and replayed as final (at most
//     once), or with AtLeastOnce a later call may run fn again.
//   - A failure's outcome (a permanent failure, or exhaustion with
//     KeepFailures) is recorded with one try, bounded by the context and
//     StoreTimeout; if it fails, the claim is released, so a later call
//     runs fn again.
//   - Recording a success's outcome fails: Do retries the store (10ms
//     backoff doubling to 1s, renewing the claim between tries, each try
//     bounded by StoreTimeout) while the claim is surely held, and gives
//     up a tenth of a lease before it could run out. It then returns an
//     error matching [ErrOutcomeNotRecorded] (not
//     [ErrIdempotencyUnavailable], which says fn did not run), permanent
//     to an outer Do, and DoValue the value: fn ran and succeeded once,
//     and the claim is left to lapse, so no other caller runs fn before
//     the lease ends; after it, a call with the key may run fn again,
//     so keep or report the result yourself (do not acknowledge a queue
//     message blindly). The call is not dead-lettered.
//   - The key used with another payload ([WithPayload], compared by its
//     SHA-256): [ErrKeyReuse], fn not called.
//   - A store that fails or times out (StoreTimeout):
//     [ErrIdempotencyUnavailable], fn not called, unless FailOpen.
//   - fn panics: the claim is released, then the panic goes on. A panic
//     in the value's encoding (IdempotencyOptions.Marshal, or a
//     MarshalJSON) comes after fn succeeded: the key is completed as a
//     permanent failure instead, as for a value that cannot be encoded,
//     so that the work is not repeated; observers still hear the call
//     end.
//
// A side effect can happen twice in exactly these cases: a process that
// dies after fn acted and before the outcome was stored (its claim lapses
// with the lease); an unknown outcome with AtLeastOnce, or whose record
// failed, once the lease has run out; a success whose outcome was not
// recorded ([ErrOutcomeNotRecorded]), once the lease has run out;
// FailOpen while the store fails; and the retention's end. Within one
// call, each attempt runs fn again, as without idempotency. Pass the key
// downstream (retryhttp sends it as Idempotency-Key) to close these too.
//
// opts may be nil for the defaults; see [IdempotencyOptions] for the key
// and the settings. Idempotency keys never appear in Do's error text or
// logs. store must not be nil, nor hold a nil pointer. Default: no
// idempotency.
func WithIdempotency(store IdempotencyStore, opts *IdempotencyOptions) Option {
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
	if o.Marshal != nil {
		ic.marshal, ic.unmarshal = o.Marshal, o.Unmarshal
	}
	return Option{set: setIdempotency, v: ic}
}

// or returns d, or def when d is zero.
func or(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
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
