package retry

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"
)

// Jitter randomizes a wait so that callers that failed together do not
// retry together; it applies to the [Backoff]'s delay, before the
// [WithMaxDelay] cap, never to an [After] delay. It is a small comparable
// value whose zero is [NoJitter]; the Retrier draws the sample and
// [Jitter.Apply] is pure.
type Jitter struct {
	kind   jitterKind
	factor float64 // ProportionalJitter's, as given: New refuses one outside [0, 1]
}

type jitterKind uint8

const (
	noJitter jitterKind = iota
	fullJitter
	equalJitter
	proportionalJitter
)

// The jitters without parameters. See [ProportionalJitter] for ±factor.
// They are values to pass to [WithJitter]; the library's own defaults do
// not read them.
var (
	// NoJitter keeps the delay d as it is.
	NoJitter = Jitter{}
	// FullJitter waits a uniform random time in [0, d), the choice AWS's
	// "Exponential Backoff And Jitter" found to do the least work.
	FullJitter = Jitter{kind: fullJitter}
	// EqualJitter waits d/2 plus a uniform random time in [0, d/2], so
	// the wait is in [d/2, d].
	EqualJitter = Jitter{kind: equalJitter}
)

// ProportionalJitter scales a wait d by a uniform random factor in
// [1-factor, 1+factor), as gRPC does with 0.2, giving whole nanoseconds; the
// factor counts in multiples of 2^-52, rounded down, so an end of the range
// may fall 1ns inside it. factor must be in [0, 1] (0 keeps d); New and Do
// reject other values with [ErrInvalidOption].
func ProportionalJitter(factor float64) Jitter {
	return Jitter{kind: proportionalJitter, factor: factor}
}

// jitter is the Jitter that o, a WithJitter, holds.
func (o *Option) jitter() Jitter {
	return Jitter{kind: jitterKind(o.kind), factor: math.Float64frombits(uint64(o.n))}
}

// factorOne is 1 in the fixed point of proportional, 2^52.
const factorOne = 1 << 52

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
	switch j.kind {
	case fullJitter:
		return min(durationOf(float64(d)*u), d)
	case equalJitter:
		half := d / 2
		rest := d - half // keeps odd nanoseconds, so the top is exactly d
		return half + min(durationOf(float64(rest)*u), rest)
	case proportionalJitter:
		return j.proportional(d, u)
	default:
		return d
	}
}

// proportional is Apply for a proportional jitter, in integers so that
// the bounds hold exactly: with s = d·F/2^52 for F = floor(factor·2^52)
// (at most the factor given), the result is one of the whole nanoseconds
// in [d-s, d+s), d-floor(s) to d+ceil(s)-1, picked by u, saturating at the
// largest Duration. d is positive and u in [0, 1). A factor outside
// [0, 1], which New refuses, is taken as the nearer end.
func (j Jitter) proportional(d time.Duration, u float64) time.Duration {
	// factor·2^52 is exact, and d·F < 2^115 fits 128 bits, with s ≤ d.
	f := uint64(0)
	if j.factor > 0 { // NaN too is not above 0
		f = uint64(min(j.factor, 1) * factorOne)
	}
	hi, lo := bits.Mul64(uint64(d), f)
	down := hi<<12 | lo>>52 // floor(s)
	up := down
	if lo&(factorOne-1) != 0 {
		up++ // ceil(s)
	}
	n := down + up // how many whole nanoseconds [d-s, d+s) holds
	if n == 0 {
		return d // factor 0, or too small to move d by a nanosecond
	}
	// float64(n)*u may round up to n itself: the last one is n-1.
	k := min(uint64(float64(n)*u), n-1)
	w := uint64(d) - down + k // below 2d < 2^64
	if w > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(w)
}

// String returns the jitter's name, as in "FullJitter" or
// "ProportionalJitter(0.2)", with the factor as it was given.
func (j Jitter) String() string {
	switch j.kind {
	case noJitter:
		return "NoJitter"
	case fullJitter:
		return "FullJitter"
	case equalJitter:
		return "EqualJitter"
	}
	return "ProportionalJitter(" + strconv.FormatFloat(j.factor, 'g', -1, 64) + ")"
}

// validate says what is wrong with j, the Jitter given to WithJitter. The
// check inlines; the error is built out of line.
func (j Jitter) validate() error {
	if j.kind != proportionalJitter || j.factor >= 0 && j.factor <= 1 {
		return nil
	}
	return j.invalid()
}

// invalid is the error of a Jitter that validate refuses.
func (j Jitter) invalid() error {
	return fmt.Errorf("%w: %v: factor must be in [0, 1]", ErrInvalidOption, j)
}
