package overload_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry/overload"
)

func newRate(t *testing.T, o overload.RateOptions) (*overload.Rate, *clock.Mock) {
	t.Helper()
	clk := clock.NewMock()
	o.Clock = clk
	r, err := overload.NewRate(o)
	require.NoError(t, err)
	return r, clk
}

// admitted counts the attempts of x that r admits out of n.
func admitted(r overload.RateLimit, x try, n int) int {
	ok := 0
	for range n {
		if err := r.Admit(x.ctx, x.a); err == nil {
			ok++
		}
	}
	return ok
}

func TestRate_admitsTheBurstThenThePace(t *testing.T) {
	r, clk := newRate(t, overload.RateOptions{PerSecond: 10, Burst: 3})
	assert.Equal(t, 3, admitted(r, first, 10), "the burst, then nothing")
	assert.ErrorIs(t, r.Admit(first.ctx, first.a), overload.ErrRateLimited)
	clk.Add(100 * time.Millisecond)
	assert.Equal(t, 1, admitted(r, first, 10), "one interval, one attempt")
	clk.Add(time.Second)
	assert.Equal(t, 3, admitted(r, first, 10), "an idle spell gives the burst back, no more")
	assert.Equal(t, uint64(8+9+7), r.Refused())

	// Over a long run, the rate is exact.
	n := 0
	for range 100 {
		clk.Add(100 * time.Millisecond)
		n += admitted(r, retried, 5)
	}
	assert.Equal(t, 100, n, "10 s at 10 per second")
}

func TestRate_burstDefaultsToASecondsWorth(t *testing.T) {
	r, _ := newRate(t, overload.RateOptions{PerSecond: 2.5})
	assert.Equal(t, 3, admitted(r, first, 10))
}

func TestRate_capsRetriesWithinTheRate(t *testing.T) {
	r, clk := newRate(t, overload.RateOptions{PerSecond: 100, Burst: 10, RetriesPerSecond: 1, RetryBurst: 2})
	assert.Equal(t, 2, admitted(r, retried, 5), "the retries' burst")
	assert.Equal(t, 0, admitted(r, hedged, 5), "hedges count as retries")
	assert.Equal(t, 8, admitted(r, first, 20), "first attempts keep the rest of the burst")
	clk.Add(time.Second)
	assert.Equal(t, 1, admitted(r, retried, 5))
}

func TestRate_partitionsHaveTheirOwnRate(t *testing.T) {
	r, _ := newRate(t, overload.RateOptions{PerSecond: 1, Burst: 2, Partitioned: true})
	a := try{first.a, overload.WithPartition(context.Background(), "a")}
	b := try{first.a, overload.WithPartition(context.Background(), "b")}
	assert.Equal(t, 2, admitted(r, a, 5))
	assert.Equal(t, 2, admitted(r, b, 5))
	assert.Equal(t, 2, admitted(r, first, 5), "no partition is one of its own")
}

func TestRate_concurrentAdmissionsAreExact(t *testing.T) {
	r, _ := newRate(t, overload.RateOptions{PerSecond: 1, Burst: 500})
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { ok.Add(int64(admitted(r, first, 200))) })
	}
	wg.Wait()
	assert.Equal(t, int64(500), ok.Load())
}

func TestRate_zeroRefusesEverything(t *testing.T) {
	var r overload.Rate
	assert.ErrorIs(t, r.Admit(first.ctx, first.a), overload.ErrRateLimited)
}

func TestNewRate_refusesWhatCannotBeMeant(t *testing.T) {
	for _, tc := range []struct {
		o    overload.RateOptions
		want string
	}{
		{overload.RateOptions{}, "PerSecond 0 must be in (0, 1e9]"},
		{overload.RateOptions{PerSecond: 2e9}, "PerSecond 2e+09 must be in (0, 1e9]"},
		{overload.RateOptions{PerSecond: 10, RetriesPerSecond: 20}, "RetriesPerSecond 20 must be in [0, PerSecond]"},
		{overload.RateOptions{PerSecond: 10, Burst: -1}, "Burst -1 must be at least 1"},
		{overload.RateOptions{PerSecond: 10, MaxPartitions: -1}, "MaxPartitions -1 is negative"},
		{overload.RateOptions{PerSecond: 10, Clock: (*clock.Mock)(nil)}, "nil pointer"},
	} {
		_, err := overload.NewRate(tc.o)
		assert.ErrorContains(t, err, tc.want)
	}
}
