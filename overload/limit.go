package overload

import (
	"context"
	"errors"
	"time"
)

// Limit bounds the attempts in flight to one downstream: set it in
// retry.OverloadOptions, one per downstream, shared by every Retrier that
// calls it. Every attempt takes a permit (first attempts, retries and
// hedges alike) and gives it back when it ends, never holding it through
// a wait between attempts. [Adaptive] is the library's. Implementations
// must be safe for concurrent use; only Acquire may block.
type Limit interface {
	// Acquire takes a permit for attempt a of the call whose context is
	// ctx, or returns an error that matches [ErrLimitExceeded]. It may
	// wait for a permit until ctx ends; it is called on the attempt's
	// goroutine (a hedge's own).
	Acquire(ctx context.Context, a Attempt) error
	// Release gives back the permit of an attempt, which ended with r
	// after latency by the Retrier's clock (0 unless the Limit has a
	// method Timed() bool that reports true: timing costs each attempt
	// two clock readings). It must not block.
	Release(r Result, latency time.Duration)
}

// ErrLimitExceeded is matched (errors.Is) by the error of a call whose
// attempt a [Limit] refused: fn was not called. The call ends with
// retry.OutcomeRefused.
var ErrLimitExceeded = errors.New("concurrency limit reached")

// Attempt is what a [Limit] is told of an attempt. The call's
// [Criticality] is in the context Acquire gets ([CriticalityOf]): a limit
// reads it only when it must choose, since a lookup walks the context.
type Attempt struct {
	Kind Kind
}

// Kind says what an attempt is to a [Limit]: when it is full, retries and
// hedges are shed before first attempts.
type Kind uint8

// The kinds of attempts.
const (
	FirstAttempt Kind = iota // a call's first attempt
	RetryAttempt             // an attempt after a failed one
	HedgeAttempt             // an attempt sent beside one still running (retry.Hedge)
)

// Criticality says how much a call matters when a [Limit] is full, as
// the SRE book's client-side throttling orders requests. The zero value
// is [DefaultCriticality].
type Criticality uint8

// The criticalities, from the zero value.
const (
	DefaultCriticality Criticality = iota // shed after Sheddable
	Critical                              // shed last; served first from a queue
	Sheddable                             // shed first, as a retry is
)

// Result is how an attempt that held a permit ended, as the policy judged
// its error.
type Result uint8

// The results.
const (
	Answered Result = iota // a success, or an answer for good: the downstream coped
	Failed                 // a failure worth retrying: the downstream may be overloaded
	Dropped                // says nothing of the downstream: the call's context, a lost hedge, a panic
)

type criticalityKey struct{}

// WithCriticality returns ctx carrying c, which the attempts of a call
// made with it tell a [Limit].
func WithCriticality(ctx context.Context, c Criticality) context.Context {
	return context.WithValue(ctx, criticalityKey{}, c)
}

// CriticalityOf returns the criticality ctx carries, or
// [DefaultCriticality].
func CriticalityOf(ctx context.Context) Criticality {
	c, _ := ctx.Value(criticalityKey{}).(Criticality)
	return c
}
