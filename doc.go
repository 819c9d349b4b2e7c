// Package retry calls a function again when it fails for a transient
// reason, and stops at once when it fails for good.
//
//	err := retry.Do(ctx, func(ctx context.Context) error {
//		return client.Send(ctx, msg)
//	}, retry.WithMaxAttempts(5))
//
// Five names are all a first use needs:
//
//   - [Do] (and [DoValue] for a function that returns a value) runs fn
//     with the options given, retrying failures.
//   - [New] builds a [Retrier] once, to share: it is immutable, safe for
//     concurrent use, and its Do makes no allocation when the first attempt
//     succeeds, unless it is idempotent ([DoValueOn] is its DoValue).
//   - [Permanent] marks an error not worth retrying; Do stops at once.
//   - [After] marks an error with the wait a server asked for.
//   - [Error] is what Do returns whenever no attempt succeeded: errors.As
//     finds it, and errors.Is matches both why Do stopped ([ErrExhausted],
//     context.Canceled, ...) and the last attempt's error. Only bad input
//     is reported otherwise, as an error wrapping [ErrInvalidOption].
//
// Between attempts Do waits as a [Backoff] says (by default
// Exponential(100ms, 2, 10s)), randomized by a [Jitter] (FullJitter) and
// capped by [WithMaxDelay] if given; a server's delay is capped at 30s
// without it. Do never waits between attempts past its context's
// deadline or its [WithMaxElapsed] budget: when the next wait would end at
// or after either, it returns at once. (The one wait that is not between
// attempts: with [WithIdempotency], recording a success's outcome is
// retried while the claim's lease surely lasts, whatever the context.)
// A call whose context ends while fn runs ends with [OutcomeUnknown]:
// fn may have acted, and [WithIdempotency] keeps its key.
//
// Beyond that, each concern has its place:
//
//   - exactly-once side effects: [WithIdempotency] with an
//     [idempotency.Store] (in memory, Redis or PostgreSQL);
//   - work that gave up: [WithDeadLetter] with a [DeadLetterSink], and the
//     deadletter package to keep and redrive them;
//   - metrics, logs and traces: an [Observer] ([WithObserver]);
//   - protecting a downstream ([WithOverload]): a retry budget shared by
//     its calls (a Retrier from New has one by default), a circuit
//     breaker, and one layer of retries (an error another Retrier gave up
//     on is not retried again, see OverloadOptions.NestedRetries); the
//     overload package has the budgets;
//   - the slow call that never fails: [WithHedge] and [Retrier.Hedge],
//     which start another attempt beside one that has not answered, for
//     work safe to run twice;
//   - HTTP: the retryhttp package's RoundTripper;
//   - tests: [WithClock] with a mock clock; the retrytest package's Clock
//     says when Do has armed a wait (see the mockClock example).
//
// # Waits
//
// [Retrier.Wait] computes a wait as Do does. When err holds an [After]
// marker, d is the server's delay, capped as Do caps it ([WithMaxDelay],
// else 30s), and server is true; otherwise d is the [Backoff]'s delay for
// the attempt and prev (the wait before it, 0 after the first), randomized
// by the [Jitter] and capped by WithMaxDelay. rnd gives the samples in
// [0, 1) Do would draw, at most two, in order (a randomized Backoff's,
// then the Jitter's); a nil rnd draws from r's source, as
// float64(src.Uint64()>>11) / (1<<53) for [WithRandom]'s src.
//
// A wait of minutes is better made in a queue than in memory: with
// [WithHandOff], a wait of at least its threshold (1 minute), even past
// the deadline, or any wait once the process is stopping, is given with
// the call's remaining attempts to a [HandOff] (retryriver's enqueues a
// River job at the retry time), and Do returns at once with
// [OutcomeHandedOff] and a [*HandedOff] in its chain. The worker that runs the
// job goes on with the call through [WithResume]. Without a queue, keep
// waits under a minute ([WithMaxDelay]) and let the call give up to its
// dead letter.
//
// # Idempotent calls
//
// With [WithIdempotency], Do claims the call's key in the store with a
// lease (IdempotencyOptions.Lease) before the first attempt and renews it
// before each later one; all attempts of one call share the claim. Then:
//
//   - A completed key: fn is not called. Do returns nil and DoValue the
//     stored value, decoded by IdempotencyOptions.Unmarshal; a stored
//     permanent failure comes back as an [*Error] with [OutcomePermanent],
//     the original message, and a chain matching [ErrReplayed].
//   - A key held by another caller: Do waits for the holder's outcome,
//     spending no attempts (see FailWhileHeld), and replays it, or claims
//     the key if the holder released it. A call that ends while the key
//     is held matches [ErrInProgress] and is not dead-lettered.
//   - Success and permanent failure are stored as final for Retention. A
//     success is stored before Do returns it: a nil from Do means no later
//     call with the key runs fn within the retention. Exhaustion, the time
//     budget, and a context that ended during a wait release the claim, so
//     a later call runs again (see KeepFailures).
//   - A context that ended while fn ran, or a claim that could not be
//     renewed, leaves the outcome unknown ([ErrOutcomeUnknown]): the claim
//     is kept until its lease ends, then by default the outcome is stored
//     and replayed as final (at most once); with AtLeastOnce a later call
//     may run fn again.
//   - A failure's outcome (permanent, or exhaustion with KeepFailures) is
//     recorded with one try, bounded by the context and StoreTimeout; if
//     that fails, or the call's dead letter could not be written, the
//     claim is released and a later call runs fn again. An unknown outcome
//     whose dead letter failed is stored all the same, marked, and each
//     replay of it writes the dead letter, so no failure is kept without one.
//   - A success's outcome that cannot be recorded is retried (10ms backoff
//     doubling to 1s, renewing the claim between tries, each bounded by
//     StoreTimeout) until a tenth of a lease before the claim could run
//     out. Do then returns an error matching [ErrOutcomeNotRecorded] (not
//     [ErrIdempotencyUnavailable], which says fn did not run), permanent
//     to an outer Do, and DoValue the value too; the call is not
//     dead-lettered. The claim lapses with its lease, after which fn may
//     run again: keep or report the result yourself (do not acknowledge a
//     queue message blindly).
//   - The key used with another payload ([WithPayload], compared by its
//     SHA-256): [ErrKeyReuse], fn not called.
//   - A store that fails or times out: [ErrIdempotencyUnavailable], fn not
//     called, unless FailOpen.
//   - fn panics: the claim is released, then the panic goes on. A panic
//     encoding the value (IdempotencyOptions.Marshal, or a MarshalJSON)
//     comes after fn succeeded, so the key is completed as a permanent
//     failure instead, as for a value that cannot be encoded; observers
//     still hear the call end.
//
// A side effect can happen twice in exactly these cases: a process that
// dies after fn acted and before the outcome was stored (its claim lapses
// with the lease); once the lease has run out, an unknown outcome with
// AtLeastOnce or whose record failed, and a success whose outcome was not
// recorded; FailOpen while the store fails; and the retention's end.
// Within one call, each attempt runs fn again, as without idempotency.
// Pass the key downstream (retryhttp sends it as Idempotency-Key) to close
// these too.
//
// # Keys
//
// A call's key is IdempotencyOptions.Key, or the one given by
// [ContextWithIdempotencyKey], which overrides it, except in a context
// inherited from an enclosing idempotent call with the same key: there the
// Retrier's Key wins, and without a different one the call fails at once
// with a permanent error wrapping [ErrInvalidOption], rather than wait for
// itself. Do checks the key (1 to 255 bytes). Keys never appear in Do's
// error text or logs.
//
// # Dead letters
//
// With [WithDeadLetter], Do calls the sink's Put once, on a goroutine of
// its own, with ctx's values but not its cancellation, and waits no
// longer than DeadLetterOptions.Timeout. Each error text is cut to 4,096
// bytes (its first and last bytes), the attempts' errors to 64 KiB in all
// (the middle ones dropped); the payload is kept whole. If the sink and
// fallback fail, Do's error also matches [ErrDeadLetterNotRecorded]: work
// is never dropped silently.
//
// Whatever DeadLetterOptions.On says, these are not dead-lettered, since
// a redrive would repeat work that did not fail: a failure replayed by
// [WithIdempotency] (except in [Retrier.ForRedrive]), a call that lost to
// another holder of its key (found held, or [idempotency.ErrLeaseLost]), and a
// success the store could not record, also when an inner idempotent Do in
// fn returned them.
//
// A Retrier from ForRedrive dead-letters every failure, whatever its
// outcome, as a new record with Redrives one higher and RedriveOf = dl.ID,
// to r's sink or else to src. That includes a failure replayed by
// WithIdempotency, since dl's work would otherwise be lost; a replay that
// lost to another holder of the key, or whose success the store could not
// record, is not dead-lettered. A record without a key is replayed
// without idempotency (r's default key would be shared by unrelated
// records); to give the replay dl's key, use [ContextWithIdempotencyKey].
//
// # Budgets
//
// A [Retrier] from [New] has a retry budget of its own, shared with those
// from [Retrier.With]: overload.NewRatio's defaults on the Retrier's
// clock, so retries may be 10 % of the last 10 seconds' calls plus 2 a
// second (about 1.1x the load on a downstream that fails every call, and a
// one-second blip after steady traffic is retried in full; see
// docs/overload.md). OverloadOptions.Budget replaces it, and NoBudget
// removes it; [Do], [DoValue] and the zero Retrier have none.
//
// # Breakers
//
// An [overload.Breaker]'s Allow refuses an attempt with a non-nil error (wrapping
// [overload.ErrCircuitOpen]): fn is not called, and the call ends at once
// with an [*Error] of [OutcomeRefused] that matches the refusal and the
// last real attempt's error, if any. Otherwise Do calls done when the
// attempt ends with nil for a success or an answer for good ([Permanent],
// refused by [WithRetryIf]); an error matching [overload.ErrNotCounted]
// when the attempt says nothing of the downstream (the call's context
// ended it, it was cancelled, or another Retrier gave up on its error);
// else the attempt's error, a failure, as a panic in fn is.
//
// A Breaker may also have a method Refuses() error, which says, reserving
// nothing, whether Allow would refuse now; Do asks it before each wait, so
// that a breaker that has just opened ends the call at once, without a
// wait.
//
// # Limits
//
// An [overload.Limit] bounds the attempts in flight to a downstream. Every
// attempt, first, retry or hedge, asks it for a permit once the breaker
// allowed it ([overload.Attempt] says which, and the call's context its
// [overload.Criticality]); a refusal ends the call with an [*Error] of
// [OutcomeRefused] matching [overload.ErrLimitExceeded], fn not called. The
// permit goes back when the attempt ends, before any wait, with how the
// policy judged it: answered, failed (worth retrying) or dropped (the
// call's context, a lost hedge, a panic). An [overload.RateLimit] is
// asked likewise, after the breaker and before the limit, and refuses
// with [overload.ErrRateLimited].
//
// An [overload.Pause] is set by an attempt whose error carries a server's
// delay ([After]): every call sharing it holds its next attempt, first
// attempts too, until the delay's end plus a random share of the pause's
// Spread, in memory or handed off as a wait is; a call whose deadline
// comes first ends at once, [OutcomeRefused] matching
// [overload.ErrPaused]. No hedge is sent while it is in force.
//
// # Observer events
//
// A call's events are OnAttemptStart, OnAttemptEnd, then OnRetry or
// OnDone. After OnRetry comes the wait, unless its Delay is 0, and
// OnWaitEnd when it ends (Cut if the call's context ended it), then the
// next OnAttemptStart, or OnDone if the call stops. A call handed off
// ([WithHandOff]) has no OnRetry for the wait it did not make: OnDone
// follows OnAttemptEnd, with [OutcomeHandedOff]. OnDone comes exactly
// once per call, even when no attempt ran or fn panicked (then the error
// of OnAttemptEnd and OnDone reads "retry: the attempt panicked", Outcome
// is OutcomePermanent, and the panic goes on), but not for bad input
// ([ErrInvalidOption]). A panic in WithRetryIf is told this way only when
// a budget or breaker judges the attempt; otherwise no end is told. The
// [Observer] doc gives the rule by which these events keep gauges of calls
// in flight and of waits in progress.
//
// # Clocks
//
// [WithClock] sets the clock Do waits and times on. If it has a method
// WaitArmed(d time.Duration), like the retrytest package's Clock, Do calls
// it on its goroutine once per wait between attempts, after arming the
// timer (none for d = 0) and before blocking, not when it stops instead; a
// test must not advance a mock before then, or Do waits forever.
//
// # Cost
//
// A prebuilt [Retrier]'s Do makes no allocation when the first attempt
// succeeds, starts no goroutine, and uses at most one timer per call,
// reused across waits. The package-level [Do] and [DoValue] build the
// policy only when a retry needs it, so when no option acts on the first
// attempt (observers, idempotency, dead letters and time limits do) they
// make no allocation of their own on a first-try success. An [Option]
// that holds a value in an interface allocates where it is built: a
// payload ([WithPayload], 24 B for a non-nil slice), or a backoff with
// parameters (24 B for [Exponential]); build the options, or a Retrier,
// once to pay it once.
//
// Two features need more. [WithIdempotency] keeps the call's state and
// the store's work on the heap: with memstore, 6 allocations for a
// first-time key, 2 (the decoded value's) for a replayed success, and no
// timer per store call; the lease renewals of a Retrier's calls share one
// timer, which a call that ends within a third of a lease leaves alone.
// [WithAttemptTimeout] costs each attempt a context and its timer, from
// context.WithTimeout or the injected clock's WithTimeout, which may start
// a goroutine that ends with the attempt (the standard library does for a
// parent context of a type of its own; clock.Mock always does). Without
// an [Observer] Do makes no observer calls and reads no clock it does not
// need; with one it reads the monotonic clock twice per call. A dead
// letter is built only after the first failure, so a call that succeeds
// at once allocates nothing for it, and without [WithDeadLetter] Do keeps
// no per-attempt history. [Retrier.Hedge] and [HedgeValue] keep fn on the
// heap and cost each hedged attempt a timer and a context (3 allocations
// when it answers in time, the rest of the call's state reused from a
// pool of the Retrier's, and no goroutine), and each hedge a goroutine
// that ends with it; Do never hedges, and pays nothing for them.
//
// BENCHMARKS.md has the figures, against a direct call and the peers.
package retry
