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

	// proportionalJitter keeps its factor in the high 56 bits as a
	// fixed-point fraction of 2^52, rounded down (so that the range it
	// spans is never wider than the factor given), so that a Jitter stays
	// a small comparable integer; badProportionalJitter keeps what is wrong with
	// an out-of-range factor (badNegative, badAboveOne or badNaN in bits
	// 8-9, badExact in bit 10) and the factor as float32 bits in the high
	// 32, only to name it in the error.
	proportionalJitter
	badProportionalJitter
)

const (
	jitterKindMask = 0xff
	factorOne      = 1 << 52

	badNegative = 1 << 8
	badAboveOne = 2 << 8
	badNaN      = 3 << 8
	badWhy      = 3 << 8
	badExact    = 1 << 10 // the float32 bits hold the factor exactly
)

// ProportionalJitter scales a wait d by a uniform random factor in
// [1-factor, 1+factor), as gRPC does with 0.2, giving whole nanoseconds; the
// factor is rounded down to a multiple of 2^-52, so an end of the range may
// fall 1ns inside it. factor must be in [0, 1] (0 keeps d); New and Do
// reject other values with [ErrInvalidOption].
func ProportionalJitter(factor float64) Jitter {
	if !(factor >= 0 && factor <= 1) {
		j := badProportionalJitter | Jitter(math.Float32bits(float32(factor)))<<32
		switch {
		case factor < 0:
			j |= badNegative
		case factor > 1:
			j |= badAboveOne
		default:
			j |= badNaN
		}
		if float64(float32(factor)) == factor {
			j |= badExact
		}
		return j
	}
	// factor*2^52 is exact; rounding it down keeps the spread within
	// the factor's.
	return proportionalJitter | Jitter(math.Floor(factor*factorOne))<<8
}

func (j Jitter) factor() float64 {
	return float64(j>>8) / factorOne
}

// badFactor names the out-of-range factor of a bad proportional jitter,
// and reports whether j is one: its value when ProportionalJitter could
// keep it exactly, else what is wrong with it.
func (j Jitter) badFactor() (string, bool) {
	if j&jitterKindMask != badProportionalJitter || j&badWhy == 0 || j&^(Jitter(math.MaxUint32)<<32|badWhy|badExact|jitterKindMask) != 0 {
		return "", false
	}
	if j&badExact != 0 {
		return fmt.Sprint(math.Float32frombits(uint32(j >> 32))), true
	}
	switch j & badWhy {
	case badNegative:
		return "a negative factor", true
	case badAboveOne:
		return "a factor above 1", true
	}
	return "NaN", true
}

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
		return j.proportional(d, u)
	default:
		return d
	}
}

// proportional is Apply for a valid proportional jitter, in integers so
// that the bounds hold exactly: with s = d·factor (the kept factor, at
// most the given one), the result is one of the whole nanoseconds in
// [d-s, d+s), d-floor(s) to d+ceil(s)-1, picked by u, saturating at the
// largest Duration. d is positive and u in [0, 1). A factor above 1,
// which only a Jitter made by hand from an integer holds (New refuses
// it), is taken as 1.
func (j Jitter) proportional(d time.Duration, u float64) time.Duration {
	// s = d·F/2^52 for the kept factor F ≤ 2^52: d·F < 2^115 fits 128
	// bits, and s ≤ d.
	hi, lo := bits.Mul64(uint64(d), min(uint64(j>>8), factorOne))
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
// "ProportionalJitter(0.2)". The factor is kept as a multiple of 2^-52;
// String shows the shortest decimal that ProportionalJitter keeps as the
// same Jitter, so the factor reads as it was written.
func (j Jitter) String() string {
	switch {
	case j == NoJitter:
		return "NoJitter"
	case j == FullJitter:
		return "FullJitter"
	case j == EqualJitter:
		return "EqualJitter"
	case j&jitterKindMask == proportionalJitter && j>>8 <= factorOne:
		return "ProportionalJitter(" + shortestFactor(j) + ")"
	}
	if f, ok := j.badFactor(); ok {
		return "ProportionalJitter(" + f + ")"
	}
	return fmt.Sprintf("Jitter(%d)", uint64(j))
}

// shortestFactor formats the factor of a valid proportional jitter with
// the fewest digits that map back to j.
func shortestFactor(j Jitter) string {
	f := j.factor()
	for prec := 1; prec < 17; prec++ {
		s := strconv.FormatFloat(f, 'g', prec, 64)
		if v, err := strconv.ParseFloat(s, 64); err == nil && ProportionalJitter(v) == j {
			return s
		}
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func (j Jitter) validate() error {
	// The check inlines; the error is built out of line. The jitters
	// without a parameter are the three smallest values.
	if j <= EqualJitter || j&jitterKindMask == proportionalJitter && j>>8 <= factorOne {
		return nil
	}
	return j.invalid()
}

// invalid is the error of a Jitter that validate refuses.
func (j Jitter) invalid() error {
	if f, ok := j.badFactor(); ok {
		return fmt.Errorf("%w: ProportionalJitter(%s): factor must be in [0, 1]", ErrInvalidOption, f)
	}
	return fmt.Errorf("%w: unknown jitter %d", ErrInvalidOption, uint64(j))
}
