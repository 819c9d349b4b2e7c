package overload

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// TokenBucketOptions configures a [TokenBucket]. The zero value gives the
// defaults.
type TokenBucketOptions struct {
	// MaxTokens is the bucket's size, in (0, 1000] as gRPC requires. The
	// bucket starts full and allows retries while it holds more than half
	// of it. Default: 100, so that the bucket closes after 50 failed
	// attempts without a success (33 retries in all, with 3 attempts per
	// call, for a downstream that fails every one).
	MaxTokens int
	// TokenRatio is what each success puts back, in tokens; it must be
	// positive, and digits past the third decimal are dropped, as gRFC
	// A6 says (0.5466 puts back 0.546). Retries stop for good when
	// more than about TokenRatio failures happen per success. Default:
	// 0.1, gRPC's example: throttled above ~10 % failures.
	TokenRatio float64
	// ThrottleCost is what a failure costs when the server asked for a
	// delay (a retry.After error, such as an HTTP 429 or 503 with
	// Retry-After), in tokens; other failures cost 1. It must be in [1,
	// MaxTokens]. Default: 1.
	ThrottleCost int
	// MaxWaiting bounds how many calls sharing the bucket may wait between
	// attempts at once; one more is refused at once with
	// [ErrBudgetExhausted]. Each waiting call keeps its goroutine (about
	// 2-4 KB of stack, see BENCHMARKS.md). It must not be negative; 0 means
	// no bound. Default: no bound.
	MaxWaiting int
}

// TokenBucket is a retry budget after gRPC's retry throttling (gRFC A6):
// it starts full at MaxTokens; a failed attempt worth retrying takes 1
// token (ThrottleCost if throttled), a success puts back TokenRatio up to
// MaxTokens, nothing else moves it, and a retry is allowed only while it
// holds more than MaxTokens/2; a first attempt is never refused. Build one
// with [NewTokenBucket] (the zero value, of size 0, refuses every retry,
// matching [ErrBudgetExhausted]) and share it by all calls to one
// downstream; it is safe for concurrent use.
type TokenBucket struct {
	tokens       atomic.Int64 // thousandths of a token
	max          int64
	half         int64
	refund       int64
	cost         int64
	throttleCost int64
	wait         waitLimit
}

// NewTokenBucket returns a full bucket. Invalid options give an error that
// names the problem.
func NewTokenBucket(o TokenBucketOptions) (*TokenBucket, error) {
	if o.MaxTokens == 0 {
		o.MaxTokens = 100
	}
	if o.TokenRatio == 0 {
		o.TokenRatio = 0.1
	}
	if o.ThrottleCost == 0 {
		o.ThrottleCost = 1
	}
	switch {
	case o.MaxTokens < 0 || o.MaxTokens > 1000:
		return nil, fmt.Errorf("overload: MaxTokens %d is outside (0, 1000]", o.MaxTokens)
	case !(o.TokenRatio > 0) || math.IsInf(o.TokenRatio, 0) || o.TokenRatio > float64(o.MaxTokens):
		return nil, fmt.Errorf("overload: TokenRatio %v must be positive and at most MaxTokens", o.TokenRatio)
	case o.ThrottleCost < 1 || o.ThrottleCost > o.MaxTokens:
		return nil, fmt.Errorf("overload: ThrottleCost %d is outside [1, MaxTokens]", o.ThrottleCost)
	}
	// A6 keeps three decimals and drops the rest (0.5466 counts as
	// 0.546); the nudge keeps 0.57, which is 569.99... thousandths in
	// binary, at 570.
	refund := int64(math.Floor(o.TokenRatio*1000 + 1e-6))
	if refund == 0 {
		return nil, fmt.Errorf("overload: TokenRatio %v is below the 0.001 token a bucket counts", o.TokenRatio)
	}
	b := &TokenBucket{max: int64(o.MaxTokens) * 1000, refund: refund,
		cost: 1000, throttleCost: int64(o.ThrottleCost) * 1000}
	if err := b.wait.init(o.MaxWaiting); err != nil {
		return nil, err
	}
	b.half = b.max / 2
	b.tokens.Store(b.max)
	return b, nil
}

// Attempted takes a failure's cost from the bucket, or puts a success's
// refund back. attempt is not used: every attempt counts alike.
func (b *TokenBucket) Attempted(attempt int, failed, throttled bool) {
	if !failed {
		b.add(b.refund)
		return
	}
	if throttled {
		b.add(-b.throttleCost)
		return
	}
	b.add(-b.cost)
}

// add moves the bucket by delta thousandths, within [0, max].
func (b *TokenBucket) add(delta int64) {
	for {
		old := b.tokens.Load()
		n := min(max(old+delta, 0), b.max)
		if n == old || b.tokens.CompareAndSwap(old, n) {
			return
		}
	}
}

// Retry allows a retry while the bucket holds more than half its size,
// and, with MaxWaiting, while fewer than MaxWaiting calls wait. The error
// of a refusal matches [ErrBudgetExhausted]. The zero TokenBucket refuses
// every retry.
func (b *TokenBucket) Retry(wait time.Duration) error {
	if b.tokens.Load() <= b.half {
		if b.max == 0 { // the zero TokenBucket: NewTokenBucket sets max > 0
			return errBucketZero
		}
		return errBucketEmpty
	}
	return b.wait.enter(wait)
}

// Waited gives back the waiting slot of a retry allowed by Retry.
func (b *TokenBucket) Waited() { b.wait.leave() }

// Full reports whether the bucket holds MaxTokens, when a success changes
// nothing.
func (b *TokenBucket) Full() bool { return b.tokens.Load() >= b.max }

// Tokens returns the tokens in the bucket, for tests and health pages.
func (b *TokenBucket) Tokens() float64 { return float64(b.tokens.Load()) / 1000 }

var errBucketEmpty = fmt.Errorf("%w: the token bucket is at or below half full", ErrBudgetExhausted)

// errBucketZero refuses the retries of a zero TokenBucket, whose size is 0.
var errBucketZero = fmt.Errorf("overload: a TokenBucket must be made with NewTokenBucket: the zero TokenBucket refuses every retry (%w)", ErrBudgetExhausted)
