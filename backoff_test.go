package retry_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/steadfast-go/retry"
)

func nanFloat() float64 { return math.NaN() }
func infFloat() float64 { return math.Inf(1) }

const maxDuration = time.Duration(math.MaxInt64)

func TestBackoffSchedules(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name string
		b    retry.Backoff
		want []time.Duration // waits after attempts 1, 2, 3, ...
	}{
		{"constant", retry.Constant(5 * ms), []time.Duration{5 * ms, 5 * ms, 5 * ms}},
		{"constant_zero", retry.Constant(0), []time.Duration{0, 0}},
		{"linear", retry.Linear(100*ms, 50*ms, 220*ms), []time.Duration{100 * ms, 150 * ms, 200 * ms, 220 * ms, 220 * ms}},
		{"linear_zero_step", retry.Linear(10*ms, 0, time.Second), []time.Duration{10 * ms, 10 * ms}},
		{"exponential", retry.Exponential(100*ms, 2, time.Second),
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}},
		{"exponential_1_5", retry.Exponential(time.Second, 1.5, time.Minute),
			[]time.Duration{time.Second, 1500 * ms, 2250 * ms, 3375 * ms}},
		{"exponential_multiplier_1", retry.Exponential(time.Second, 1, time.Minute), []time.Duration{time.Second, time.Second}},
		{"exponential_zero_initial", retry.Exponential(0, 2, time.Minute), []time.Duration{0, 0, 0}},
		{"func", retry.BackoffFunc(func(n int) time.Duration { return time.Duration(n) * time.Second }),
			[]time.Duration{time.Second, 2 * time.Second, 3 * time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := make([]time.Duration, len(tc.want))
			for i := range got {
				got[i] = tc.b.Delay(i+1, 0, 0.5)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestDecorrelated_drawsBetweenBaseAndThreeTimesPrevious(t *testing.T) {
	b := retry.Decorrelated(time.Second, time.Minute)
	assert.Equal(t, time.Second, b.Delay(1, 0, 0), "prev 0 is taken as base")
	assert.Equal(t, 2*time.Second, b.Delay(1, 0, 0.5))
	assert.Equal(t, 10*time.Second, b.Delay(5, 4*time.Second, 0.8181818181818182))
	assert.Equal(t, time.Minute, b.Delay(9, time.Hour, 0.5), "capped")
	assert.Equal(t, time.Minute, b.Delay(9, maxDuration, 0.99), "3*prev does not overflow")
}

// checkBounds asserts the overflow property for one set of parameters.
func checkBounds(t *testing.T, initial, maxD time.Duration, mult float64, attempt int, prev time.Duration, u float64) {
	t.Helper()
	backoffs := map[string]retry.Backoff{
		"constant":     retry.Constant(maxD),
		"linear":       retry.Linear(initial, initial, maxD),
		"exponential":  retry.Exponential(initial, mult, maxD),
		"decorrelated": retry.Decorrelated(max(initial, 1), max(maxD, 1)),
	}
	for name, b := range backoffs {
		d := b.Delay(attempt, prev, u)
		if d < 0 || d > max(maxD, 1) {
			t.Fatalf("%s.Delay(%d, %v, %v) with initial %v, multiplier %v, max %v = %v, outside [0, max]",
				name, attempt, prev, u, initial, mult, maxD, d)
		}
		if f := retry.FullJitter.Apply(d, u); f < 0 || f > d {
			t.Fatalf("FullJitter.Apply(%v, %v) = %v, outside [0, d]", d, u, f)
		}
		if e := retry.EqualJitter.Apply(d, u); e < d/2 || e > d {
			t.Fatalf("EqualJitter.Apply(%v, %v) = %v, outside [d/2, d]", d, u, e)
		}
		if p := retry.ProportionalJitter(1).Apply(d, u); p < 0 {
			t.Fatalf("ProportionalJitter(1).Apply(%v, %v) = %v, negative", d, u, p)
		}
	}
}

// validParams maps arbitrary fuzz input onto valid backoff parameters.
func validParams(initial, maxD int64, mult float64) (time.Duration, time.Duration, float64) {
	i, m := time.Duration(initial&math.MaxInt64), time.Duration(maxD&math.MaxInt64)
	if m < i {
		i, m = m, i
	}
	if math.IsNaN(mult) || math.IsInf(mult, 0) {
		mult = 2
	}
	return i, m, 1 + math.Abs(math.Mod(mult, 1e6))
}

func TestBackoffAndJitter_neverOverflow(t *testing.T) {
	// A seeded sweep that reaches the extremes: attempt numbers up to
	// math.MaxInt, durations up to the largest Duration.
	rng := rand.New(rand.NewPCG(42, 42))
	attempts := []int{1, 2, 37, 63, 64, 310, 1 << 20, math.MaxInt32, math.MaxInt - 1, math.MaxInt}
	durations := []int64{0, 1, int64(time.Millisecond), int64(time.Hour), 1 << 62, math.MaxInt64}
	for range 20000 {
		initial, maxD, mult := validParams(pick(rng, durations, rng.Int64()), pick(rng, durations, rng.Int64()), rng.Float64()*100)
		attempt := attempts[rng.IntN(len(attempts))]
		if rng.IntN(2) == 0 {
			attempt = rng.IntN(math.MaxInt) + 1
		}
		checkBounds(t, initial, maxD, mult, attempt, time.Duration(pick(rng, durations, rng.Int64())), rng.Float64())
	}
}

func pick(rng *rand.Rand, edges []int64, random int64) int64 {
	if rng.IntN(2) == 0 {
		return edges[rng.IntN(len(edges))]
	}
	return random & math.MaxInt64
}

func FuzzBackoffAndJitterBounds(f *testing.F) {
	f.Add(int64(time.Millisecond), int64(time.Second), 2.0, 1, int64(0), 0.5)
	f.Add(int64(1<<62), int64(math.MaxInt64), 10.0, math.MaxInt, int64(math.MaxInt64), 0.999999)
	f.Add(int64(100*time.Millisecond), int64(math.MaxInt64), 2.0, 64, int64(0), 0.0)
	f.Fuzz(func(t *testing.T, initial, maxD int64, mult float64, attempt int, prev int64, u float64) {
		i, m, mu := validParams(initial, maxD, mult)
		if attempt < 1 {
			attempt = 1
		}
		checkBounds(t, i, m, mu, attempt, time.Duration(prev&math.MaxInt64), u)
	})
}
