package overload_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry/overload"
)

func newPause(t *testing.T, o overload.PauseOptions) (*overload.Pause, *clock.Mock) {
	t.Helper()
	clk := clock.NewMock()
	o.Clock = clk
	p, err := overload.NewPause(o)
	require.NoError(t, err)
	return p, clk
}

func TestPause_holdsUntilTheEndThenSpreads(t *testing.T) {
	p, clk := newPause(t, overload.PauseOptions{Spread: 100 * time.Millisecond})
	ctx := context.Background()
	assert.False(t, p.Paused())
	assert.Zero(t, p.Hold(ctx, nil))

	p.Extend(ctx, 2*time.Second)
	assert.True(t, p.Paused())
	assert.Equal(t, clk.Now().Add(2*time.Second), p.Until(ctx))
	seen := map[time.Duration]bool{}
	for range 200 {
		d := p.Hold(ctx, nil)
		assert.GreaterOrEqual(t, d, 2*time.Second, "never before the server's time")
		assert.Less(t, d, 2100*time.Millisecond)
		seen[d] = true
	}
	assert.Greater(t, len(seen), 100, "the held attempts are spread, not sent together")

	p.Extend(ctx, time.Second) // a shorter pause leaves the longer one
	assert.Equal(t, clk.Now().Add(2*time.Second), p.Until(ctx))

	clk.Add(1500 * time.Millisecond)
	assert.GreaterOrEqual(t, p.Hold(ctx, nil), 500*time.Millisecond)
	clk.Add(500 * time.Millisecond)
	assert.Zero(t, p.Hold(ctx, nil), "over at its end")
	assert.False(t, p.Paused(), "a call after the end pays one atomic load again")
	assert.True(t, p.Until(ctx).IsZero())
}

func TestPause_isCappedByMax(t *testing.T) {
	p, clk := newPause(t, overload.PauseOptions{Max: 10 * time.Second})
	p.Extend(context.Background(), 24*time.Hour)
	assert.Equal(t, clk.Now().Add(10*time.Second), p.Until(context.Background()))
	p.ExtendUntil("", clk.Now().Add(time.Hour))
	assert.Equal(t, clk.Now().Add(10*time.Second), p.Until(context.Background()))
}

func TestPause_tellsOnPauseOfNewPausesAndLongMovesOnly(t *testing.T) {
	type told struct {
		partition string
		until     time.Time
	}
	var got []told
	p, clk := newPause(t, overload.PauseOptions{Spread: time.Second, Partitioned: true,
		OnPause: func(partition string, until time.Time) { got = append(got, told{partition, until}) }})
	a := overload.WithPartition(context.Background(), "a")
	p.Extend(a, 2*time.Second)
	p.Extend(a, 2500*time.Millisecond) // moved on by less than Spread
	p.Extend(a, 4*time.Second)
	p.ExtendUntil("b", clk.Now().Add(time.Minute)) // another process's
	assert.Equal(t, []told{{"a", clk.Now().Add(2 * time.Second)}, {"a", clk.Now().Add(4 * time.Second)}}, got)
	assert.Equal(t, clk.Now().Add(time.Minute), p.Until(overload.WithPartition(context.Background(), "b")))
}

func TestPause_partitionsArePausedApart(t *testing.T) {
	p, _ := newPause(t, overload.PauseOptions{Partitioned: true})
	a := overload.WithPartition(context.Background(), "tenant-a")
	b := overload.WithPartition(context.Background(), "tenant-b")
	p.Extend(a, time.Second)
	assert.Positive(t, p.Hold(a, nil))
	assert.Zero(t, p.Hold(b, nil))
	assert.Zero(t, p.Hold(context.Background(), nil))

	whole, _ := newPause(t, overload.PauseOptions{})
	whole.Extend(a, time.Second)
	assert.Positive(t, whole.Hold(b, nil), "unpartitioned, a pause holds the whole downstream")
}

func TestPause_nilNeverPauses(t *testing.T) {
	var p *overload.Pause
	p.Extend(context.Background(), time.Second)
	p.ExtendUntil("", time.Now().Add(time.Second))
	assert.False(t, p.Paused())
	assert.Zero(t, p.Hold(context.Background(), nil))
	assert.True(t, p.Until(context.Background()).IsZero())
}

func TestNewPause_refusesWhatCannotBeMeant(t *testing.T) {
	for _, tc := range []struct {
		o    overload.PauseOptions
		want string
	}{
		{overload.PauseOptions{Spread: 30}, "Spread 30ns is below 1ms"},
		{overload.PauseOptions{Max: time.Microsecond}, "Max 1µs is below 1ms"},
		{overload.PauseOptions{MaxPartitions: -1}, "MaxPartitions -1 is negative"},
		{overload.PauseOptions{Clock: (*clock.Mock)(nil)}, "nil pointer"},
	} {
		_, err := overload.NewPause(tc.o)
		assert.ErrorContains(t, err, tc.want)
	}
}
