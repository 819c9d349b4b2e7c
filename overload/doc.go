// Package overload keeps retries from burying a downstream that is
// already struggling: retry budgets shared by every call to it, and the
// errors a budget or a circuit breaker refuses an attempt with.
//
// A [TokenBucket] (gRPC's retry throttling, the AWS SDKs' retry quota) and
// a [Ratio] budget (the SRE book's per-client retry ratio, Finagle's
// RetryBudget) implement retry.Budget: pass one to retry.WithBudget,
// one budget per downstream, shared by every Retrier that calls it. Both
// can also bound how many calls wait at once between attempts
// (MaxWaiting). A circuit breaker is a retry.Breaker; the retrygobreaker
// module adapts github.com/sony/gobreaker/v2.
//
// docs/overload.md explains how to choose between them, with the charts of
// cmd/retrysim.
package overload
