package overload

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPartitionOf(t *testing.T) {
	assert.Equal(t, "", PartitionOf(context.Background()))
	assert.Equal(t, "t1", PartitionOf(WithPartition(context.Background(), "t1")))
}

// A million partitions, each used once while the clock moves 1µs: the
// states live 1 ms (a thousand at a time) and memory stays bounded by
// them, not by the million.
func TestPartitions_aMillionStayWithinTheBound(t *testing.T) {
	const n, live = 1_000_000, 1000
	bound := 4*live + partitionShards*minSweep
	clk := &stepClock{t: time.Unix(0, 0)}
	r, err := NewRate(RateOptions{PerSecond: 1000, Burst: 1, Partitioned: true, Clock: clk})
	require.NoError(t, err)
	p, err := NewPause(PauseOptions{Partitioned: true, Max: time.Millisecond, Clock: clk})
	require.NoError(t, err)
	ctx := context.Background()
	biggest := 0
	for i := range n {
		pctx := WithPartition(ctx, strconv.Itoa(i))
		require.NoError(t, r.Admit(pctx, Attempt{}))
		require.ErrorIs(t, r.Admit(pctx, Attempt{}), ErrRateLimited, "each partition keeps its own rate")
		p.Extend(pctx, time.Hour)
		if i%1000 == 0 {
			require.Positive(t, p.Hold(pctx, nil))
			biggest = max(biggest, r.parts.size(), p.parts.size())
		}
		clk.t = clk.t.Add(time.Microsecond)
	}
	assert.LessOrEqual(t, biggest, bound, "the states of %d partitions, %d live at a time", n, live)
	t.Logf("at most %d partition states held for %d partitions, %d live at a time", biggest, n, live)
}

// stepClock is a clock that only tells the time, moved by hand: a
// *clock.Mock's Add sleeps a millisecond, a million times too many here.
type stepClock struct {
	clock.Clock
	t time.Time
}

func (c *stepClock) Now() time.Time { return c.t }

// Past MaxPartitions live ones, a rate's new partitions share one rate
// and a pause's are not kept.
func TestPartitions_pastTheCap(t *testing.T) {
	clk := clock.NewMock()
	r, err := NewRate(RateOptions{PerSecond: 1, Burst: 1, Partitioned: true, MaxPartitions: 640, Clock: clk})
	require.NoError(t, err)
	p, err := NewPause(PauseOptions{Partitioned: true, MaxPartitions: 640, Clock: clk})
	require.NoError(t, err)
	ctx := context.Background()
	admitted, held := 0, 0
	for i := range 100_000 {
		pctx := WithPartition(ctx, strconv.Itoa(i))
		if r.Admit(pctx, Attempt{}) == nil {
			admitted++
		}
		p.Extend(pctx, time.Minute)
		if p.Hold(pctx, nil) > 0 {
			held++
		}
	}
	assert.LessOrEqual(t, r.parts.size(), 640)
	assert.LessOrEqual(t, p.parts.size(), 640)
	assert.LessOrEqual(t, admitted, 641, "the cap's partitions, and one for the overflow's burst")
	assert.LessOrEqual(t, held, 640)
	assert.Greater(t, admitted, 500)
}
