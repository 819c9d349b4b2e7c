package overload

// Breaker is a circuit breaker's gate, asked before every attempt: set it
// in retry.OverloadOptions (retrygobreaker adapts sony/gobreaker).
// Implementations must be safe for concurrent use and must not block.
// Breakers in the retry package doc says what Do does with Allow's
// refusal, what it tells done, and the optional Refuses method.
type Breaker interface {
	Allow() (done func(err error), err error)
}
