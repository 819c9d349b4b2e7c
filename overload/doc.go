// Package overload keeps retries from burying a downstream that is
// already struggling: retry budgets shared by every call to it, and the
// errors a budget or a circuit breaker refuses an attempt with.
//
// A [Ratio] budget (the SRE book's per-client retry ratio, Finagle's
// RetryBudget; retry.New's default) and a [TokenBucket] (gRPC's retry
// throttling, gRFC A6) implement [Budget]: set one in retry.OverloadOptions,
// one budget per downstream, shared by every Retrier that calls it. Both
// can also bound how many calls wait at once between attempts
// (MaxWaiting). A circuit breaker is a [Breaker]; the retrygobreaker
// module adapts github.com/sony/gobreaker/v2.
//
// docs/overload.md explains how to choose between them, with the charts of
// cmd/retrysim.
//
// # Cost
//
// Neither budget ever delays a retry: a denied one is refused at once. A
// [Ratio] counts a call's first attempt with one atomic add, on one of 8
// counters picked from where the goroutine's stack lies, so that callers
// on many CPUs do not contend, and takes no lock; the clock is read, and
// the window moved on under a mutex, only when a retry is asked for: the
// calls counted since the window last moved are spread evenly over the
// seconds since, as a steady load makes them. Counts are exact, and for
// the same calls and times so are the decisions. A [TokenBucket] counts
// tokens in thousandths, exactly, takes no lock ever, and costs a success
// one atomic load while it is full ([TokenBucket.Full], which inlines, is
// what a Retrier checks first on a first-try success). BENCHMARKS.md has
// the figures.
package overload
