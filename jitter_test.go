package retry_test

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrytest"
)

func TestJitterApply(t *testing.T) {
	d := 10 * time.Second
	cases := []struct {
		name string
		j    retry.Jitter
		u    float64
		want time.Duration
	}{
		{"none", retry.NoJitter, 0.3, d},
		{"full_low", retry.FullJitter, 0, 0},
		{"full_mid", retry.FullJitter, 0.25, 2500 * time.Millisecond},
		{"equal_low", retry.EqualJitter, 0, 5 * time.Second},
		{"equal_mid", retry.EqualJitter, 0.5, 7500 * time.Millisecond},
		{"proportional_low", retry.ProportionalJitter(0.2), 0, 8 * time.Second},
		{"proportional_mid", retry.ProportionalJitter(0.5), 0.5, d},
		{"proportional_zero_factor", retry.ProportionalJitter(0), 0.9, d},
		{"u_above_one_is_clamped", retry.FullJitter, 7, d - 1},
		{"u_nan_is_zero", retry.EqualJitter, math.NaN(), 5 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tc.j.Apply(d, tc.u)
			assert.InDelta(t, float64(tc.want), float64(got), 2, "Apply(%v, %v)", d, tc.u)
		})
	}
	assert.Equal(t, time.Duration(0), retry.FullJitter.Apply(-time.Second, 0.5), "negative in, zero out")
	assert.Equal(t, "ProportionalJitter(0.25)", retry.ProportionalJitter(0.25).String())
	assert.Equal(t, "EqualJitter", retry.EqualJitter.String())
}

func TestProportionalJitter_String_showsTheFactorAsWritten(t *testing.T) {
	for _, f := range []float64{0, 0.1, 0.2, 0.3, 1.0 / 3, 0.5, 0.7, 0.999, 1, 1e-9, 0.123456789} {
		j := retry.ProportionalJitter(f)
		s := j.String()
		var back float64
		_, err := fmt.Sscanf(s, "ProportionalJitter(%g)", &back)
		require.NoError(t, err, s)
		assert.Equal(t, j, retry.ProportionalJitter(back), "%s names another jitter", s)
	}
	assert.Equal(t, "ProportionalJitter(0.2)", retry.ProportionalJitter(0.2).String())
	assert.Equal(t, "ProportionalJitter(0.1)", retry.ProportionalJitter(0.1).String())
	assert.Equal(t, "ProportionalJitter(1.5)", retry.ProportionalJitter(1.5).String(), "out of range: shown to name it in the error")
}

// proportionalFactors are factors whose float64 values are not multiples
// of 2^-52 (0.1, 0.3, 1/3, 1e-9) beside ones that are (0.25, 0.5, 1).
var proportionalFactors = []float64{0.1, 0.2, 0.25, 0.3, 1.0 / 3, 0.5, 0.999, 1, 1e-9}

// requireWithinFactor asserts d·(1-f) <= got < d·(1+f) in exact rational
// arithmetic, for f the float64 given to ProportionalJitter.
func requireWithinFactor(t *testing.T, f float64, d, got time.Duration, what string) {
	t.Helper()
	exact := new(big.Rat).SetFloat64(f)
	dr := new(big.Rat).SetInt64(int64(d))
	lo := new(big.Rat).Mul(dr, new(big.Rat).Sub(big.NewRat(1, 1), exact))
	hi := new(big.Rat).Mul(dr, new(big.Rat).Add(big.NewRat(1, 1), exact))
	g := new(big.Rat).SetInt64(int64(got))
	require.True(t, g.Cmp(lo) >= 0, "%s: ProportionalJitter(%v) of %v gave %v, below d·(1-f) = %s", what, f, d, got, lo.FloatString(6))
	require.True(t, g.Cmp(hi) < 0, "%s: ProportionalJitter(%v) of %v gave %v, not below d·(1+f) = %s", what, f, d, got, hi.FloatString(6))
}

// ProportionalJitter's bounds hold exactly for the factor as written, at
// both ends of the sample's range: 0.1 used to be kept as a multiple of
// 2^-52 slightly above it (500ms at u = 0 gave 449.999999ms), and u just
// below 1 reached d·(1+f) itself.
func TestProportionalJitter_staysWithinItsDocumentedRange(t *testing.T) {
	below1 := math.Nextafter(1, 0)
	durations := []time.Duration{1, 3, 7, time.Microsecond + 1, 500 * time.Millisecond, 10 * time.Second, time.Hour, 1 << 53, 1<<53 + 1, 1<<62 + 12345}
	for _, f := range proportionalFactors {
		j := retry.ProportionalJitter(f)
		for _, d := range durations {
			for _, u := range []float64{0, 0.5, below1} {
				requireWithinFactor(t, f, d, j.Apply(d, u), fmt.Sprintf("Apply(%v, %v)", d, u))
			}
		}
	}
	// 0.25 is a multiple of 2^-52: its ends are exact; 0.1's kept factor
	// is 2^-52 at most below it, which may move an end 1ns inwards.
	assert.Equal(t, 375*time.Millisecond, retry.ProportionalJitter(0.25).Apply(500*time.Millisecond, 0))
	assert.Equal(t, 625*time.Millisecond-1, retry.ProportionalJitter(0.25).Apply(500*time.Millisecond, below1))
	assert.LessOrEqual(t, retry.ProportionalJitter(0.1).Apply(500*time.Millisecond, 0), 450*time.Millisecond+1)
	assert.Equal(t, 550*time.Millisecond-1, retry.ProportionalJitter(0.1).Apply(500*time.Millisecond, below1))
	assert.Equal(t, 500*time.Millisecond, retry.ProportionalJitter(0).Apply(500*time.Millisecond, below1), "factor 0 keeps d")
	assert.Equal(t, maxDuration, retry.ProportionalJitter(1).Apply(maxDuration, below1), "saturates")
	assert.Equal(t, time.Duration(1), retry.ProportionalJitter(1).Apply(1, below1), "[0, 2ns) holds 0 and 1")
}

// fixedSource is a rand.Source that always returns x.
type fixedSource uint64

func (s fixedSource) Uint64() uint64 { return uint64(s) }

// The same bounds on the waits Do arms, with the Retrier's random source
// at its lowest and its highest sample.
func TestProportionalJitter_waitsOfDoStayWithinTheFactor(t *testing.T) {
	const d = 500 * time.Millisecond
	for _, f := range proportionalFactors {
		for _, src := range []fixedSource{0, math.MaxUint64} {
			clk := retrytest.NewClock()
			r, err := retry.New(retry.WithClock(clk), retry.WithRandom(src), retry.WithMaxAttempts(2),
				retry.WithBackoff(retry.Constant(d)), retry.WithJitter(retry.ProportionalJitter(f)))
			require.NoError(t, err)
			done := make(chan error, 1)
			calls := 0
			go func() {
				done <- r.Do(context.Background(), func(context.Context) error {
					if calls++; calls == 1 {
						return errTransient
					}
					return nil
				})
			}()
			w := <-clk.Armed()
			clk.Add(w)
			require.NoError(t, <-done)
			requireWithinFactor(t, f, d, w, fmt.Sprintf("Do's wait, source %#x", uint64(src)))
		}
	}
}

// deciles counts which tenth of [lo, hi) each sample falls in.
func deciles(samples []time.Duration, lo, hi time.Duration) [10]int {
	var counts [10]int
	for _, s := range samples {
		i := int(float64(s-lo) / float64(hi-lo) * 10)
		counts[min(max(i, 0), 9)]++
	}
	return counts
}

// chiSquare of counts against a uniform distribution.
func chiSquare(counts [10]int, n int) float64 {
	want := float64(n) / 10
	var x float64
	for _, c := range counts {
		x += (float64(c) - want) * (float64(c) - want) / want
	}
	return x
}

func TestJitter_distributionsAreUniformOverTheirRange(t *testing.T) {
	// With a fixed seed the test is deterministic; the bound is the 0.1%
	// critical value of chi-square with 9 degrees of freedom, so a
	// correct implementation passes with any seed in 999 of 1000 cases.
	const n = 20000
	const critical = 27.88
	d := 10 * time.Second
	cases := []struct {
		name   string
		draw   func(u float64) time.Duration
		lo, hi time.Duration
	}{
		{"full", func(u float64) time.Duration { return retry.FullJitter.Apply(d, u) }, 0, d},
		{"equal", func(u float64) time.Duration { return retry.EqualJitter.Apply(d, u) }, d / 2, d},
		{"proportional_0.2", func(u float64) time.Duration { return retry.ProportionalJitter(0.2).Apply(d, u) }, 8 * time.Second, 12 * time.Second},
		{"decorrelated", func(u float64) time.Duration {
			return retry.Decorrelated(time.Second, time.Hour).Delay(2, 4*time.Second, u)
		}, time.Second, 12 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(2026, 11))
			samples := make([]time.Duration, n)
			var sum float64
			for i := range samples {
				samples[i] = tc.draw(rng.Float64())
				require.GreaterOrEqual(t, samples[i], tc.lo)
				require.LessOrEqual(t, samples[i], tc.hi)
				sum += float64(samples[i])
			}
			counts := deciles(samples, tc.lo, tc.hi)
			assert.Less(t, chiSquare(counts, n), critical, "deciles %v", counts)
			mid := float64(tc.lo+tc.hi) / 2
			assert.InEpsilon(t, mid, sum/n, 0.01, "mean")
		})
	}
}

// An out-of-range factor is named in the error as it was given, so that
// the caller finds the value in their code.
func TestJitter_badValuesAreNamedAsTheyAre(t *testing.T) {
	for _, tc := range []struct {
		j    retry.Jitter
		want string
	}{
		{retry.ProportionalJitter(1.00000001), "ProportionalJitter(1.00000001)"},
		{retry.ProportionalJitter(-1e-50), "ProportionalJitter(-1e-50)"},
		{retry.ProportionalJitter(1e300), "ProportionalJitter(1e+300)"},
		{retry.ProportionalJitter(-2), "ProportionalJitter(-2)"},
		{retry.ProportionalJitter(math.NaN()), "ProportionalJitter(NaN)"},
		{retry.ProportionalJitter(math.Inf(1)), "ProportionalJitter(+Inf)"},
	} {
		assert.Equal(t, tc.want, tc.j.String())
		_, err := retry.New(retry.WithJitter(tc.j))
		require.ErrorIs(t, err, retry.ErrInvalidOption, tc.want)
		assert.Contains(t, err.Error(), tc.want+": factor must be in [0, 1]")
	}
}
