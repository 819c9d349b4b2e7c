// Package overload keeps retries from burying a downstream that is
// already struggling: retry budgets shared by every call to it, and the
// errors a budget or a circuit breaker refuses an attempt with.
//
// A [Ratio] budget (the SRE book's per-client retry ratio, Finagle's
// RetryBudget; retry.New's default) and a [TokenBucket] (gRPC's retry
// throttling, gRFC A6) implement retry.Budget: pass one to retry.WithBudget,
// one budget per downstream, shared by every Retrier that calls it. Both
// can also bound how many calls wait at once between attempts
// (MaxWaiting). A circuit breaker is a retry.Breaker; the retrygobreaker
// module adapts github.com/sony/gobreaker/v2.
//
// docs/overload.md explains how to choose between them, with the charts of
// cmd/retrysim.
package overload
