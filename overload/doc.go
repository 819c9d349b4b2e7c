// Package overload keeps retries from burying a downstream that is
// already struggling: retry budgets, concurrency and rate limits, and a
// pause, shared by every call to it, and the errors a budget, a limit, a
// rate, a pause or a circuit breaker refuses an attempt with.
//
// Which to use when: a budget bounds retries against first attempts, so
// that a failing downstream sees little more than its normal load (on by
// default in retry.New); a [Limit] bounds the attempts in flight, so that
// a slow downstream is not sent more than it completes, and sheds retries
// and hedges before first attempts; a breaker stops every attempt for a
// while once most fail; a [RateLimit] bounds the attempts per second, as
// a downstream with a quota counts them; a [Pause] holds every attempt
// while the downstream says it is rate-limited (429, gRPC pushback),
// then lets them go spread out. Give a downstream a limit when its
// latency grows with its load, a breaker when it fails fast and whole, a
// rate and a pause when it enforces a quota; all add to the budget. A
// rate and a pause can keep a state per partition of the downstream (a
// tenant, a host: [WithPartition]) in bounded memory.
//
// A [Ratio] budget (the SRE book's per-client retry ratio, Finagle's
// RetryBudget; retry.New's default) and a [TokenBucket] (gRPC's retry
// throttling, gRFC A6) implement [Budget]: set one in retry.OverloadOptions,
// one budget per downstream, shared by every Retrier that calls it. Both
// can also bound how many calls wait at once between attempts
// (MaxWaiting). A circuit breaker is a [Breaker]; the retrygobreaker
// module adapts github.com/sony/gobreaker/v2. [Adaptive] is a [Limit]
// after TCP's congestion control; with Min == Max it is a fixed limit (a
// bulkhead).
//
// docs/overload.md explains how to choose between them, with the charts of
// cmd/retrysim.
//
// # Cost
//
// Neither budget ever delays a retry: a denied one is refused at once. A
// [Ratio] counts a call's first attempt with one atomic add (inline in a
// Retrier's first try), on one of 64 cache lines picked by a hash of where
// the goroutine's stack lies, so that two calls running at once share a
// line with a chance of 1 in 64, and takes no lock; the clock is read, and
// the window moved on under a mutex, only when a retry is asked for: the
// calls counted since the window last moved are spread evenly over the
// seconds since, as a steady load makes them. Counts are exact, and for
// the same calls and times so are the decisions. A [TokenBucket] counts
// tokens in thousandths, exactly, takes no lock ever, and costs a success
// one atomic load while it is full ([TokenBucket.Full], which inlines, is
// what a Retrier checks first on a first-try success).
//
// An [Adaptive] limit costs an attempt it lets through two atomic adds to
// one word that every caller shares: one takes the permit, the other gives
// it back and counts the attempt in the window. Both are needed: a limit
// on the attempts in flight must count each of them where every caller
// sees it, and counters spread over CPUs would either let the attempts in
// flight pass the limit or be summed on every attempt. So, unlike a
// budget, it does not scale with CPUs: callers on many CPUs wait on that
// word's cache line. No lock is taken unless an attempt waits in its
// queue.
//
// A [Pause] costs a call one atomic load while none is in force. A [Rate]
// costs an attempt a reading of the monotonic clock and one
// compare-and-swap of a word every caller shares: an exact rate must know
// when each attempt goes, and the clock reading is most of its cost
// (about 30 ns on a virtual machine's kvm-clock). BENCHMARKS.md has the
// figures.
package overload
