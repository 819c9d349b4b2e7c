package retry

import (
	"fmt"
	"math"
	"time"
)

// Jitter randomizes a wait so that callers that failed together do not
// retry together. It is applied to the [Backoff]'s delay before the
// [WithMaxDelay] cap, and never to a server-supplied [RetryAfter] delay.
//
// A Jitter is a small comparable value; the zero value is [NoJitter]. The
// Retrier draws the random sample; [Jitter.Apply] itself is pure.
type Jitter uint64

// The jitters without parameters. See [ProportionalJitter] for ±factor.
const (
	// NoJitter keeps the delay d as it is.
	NoJitter Jitter = iota
	// FullJitter waits a uniform random time in [0, d), the choice AWS's
	// "Exponential Backoff And Jitter" found to do the least work.
	FullJitter
	// EqualJitter waits d/2 plus a uniform random time in [0, d/2], so
	// the wait is in [d/2, d].
	EqualJitter

	// proportionalJitter keeps its factor as float32 bits in the high 32
	// bits, so that a Jitter stays a constant-friendly integer.
	proportionalJitter
)

const jitterKindMask = 0xff

// ProportionalJitter waits d scaled by a uniform random factor in
// [1-factor, 1+factor), as gRPC does with factor 0.2. factor must be in
// [0, 1]; New and Do reject other values with [ErrInvalidOption]. The
// factor is kept with float32 precision.
func ProportionalJitter(factor float64) Jitter {
	return proportionalJitter | Jitter(math.Float32bits(float32(factor)))<<32
}

func (j Jitter) factor() float64 { return float64(math.Float32frombits(uint32(j >> 32))) }

// Apply returns the jittered form of d for the uniform sample u in [0, 1)
// (values outside are clamped into it). It never returns a negative
// Duration and never overflows: FullJitter gives [0, d), EqualJitter
// [d/2, d], NoJitter d, and ProportionalJitter saturates at the largest
// Duration.
func (j Jitter) Apply(d time.Duration, u float64) time.Duration {
	if d <= 0 {
		return 0
	}
	u = clampUnit(u)
	switch j & jitterKindMask {
	case FullJitter:
		return min(durationOf(float64(d)*u), d)
	case EqualJitter:
		half := d / 2
		rest := d - half // keeps odd nanoseconds, so the top is exactly d
		return half + min(durationOf(float64(rest)*u), rest)
	case proportionalJitter:
		f := j.factor()
		return durationOf(float64(d) * (1 + f*(2*u-1)))
	default:
		return d
	}
}

// String returns the jitter's name, as in "ProportionalJitter(0.2)".
func (j Jitter) String() string {
	switch j & jitterKindMask {
	case NoJitter:
		return "NoJitter"
	case FullJitter:
		return "FullJitter"
	case EqualJitter:
		return "EqualJitter"
	case proportionalJitter:
		return fmt.Sprintf("ProportionalJitter(%v)", j.factor())
	default:
		return fmt.Sprintf("Jitter(%d)", uint64(j))
	}
}

func (j Jitter) validate() error {
	switch j & jitterKindMask {
	case NoJitter, FullJitter, EqualJitter:
		if j>>8 != 0 {
			return fmt.Errorf("%w: unknown jitter %d", ErrInvalidOption, uint64(j))
		}
		return nil
	case proportionalJitter:
		if f := j.factor(); !(f >= 0 && f <= 1) {
			return fmt.Errorf("%w: ProportionalJitter(%v): factor must be in [0, 1]", ErrInvalidOption, f)
		}
		return nil
	default:
		return fmt.Errorf("%w: unknown jitter %d", ErrInvalidOption, uint64(j))
	}
}
