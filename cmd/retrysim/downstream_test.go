package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A request whose turn comes within the drop is served at the dropped
// rate; one the client gave up on at its deadline keeps its turn.
func TestDownstream_capacityDropAndAttemptDeadline(t *testing.T) {
	s := newSim()
	d := &downstream{s: s, capacity: 10, drop: window{time.Second, 2 * time.Second}, dropped: 2,
		attempts: newSeries(time.Second, 3*time.Second)}
	c := s.Clock()
	type answer struct {
		start, end time.Duration
		err        error
	}
	var got []answer
	for _, at := range []time.Duration{0, time.Second, time.Second, time.Second} {
		s.GoAt(at, func(p *proc) {
			ctx, cancel := c.WithTimeout(context.Background(), 700*time.Millisecond)
			defer cancel()
			start := s.Elapsed()
			err := d.attemptWithin(p, ctx)
			got = append(got, answer{start, s.Elapsed(), err})
		})
	}
	require.NoError(t, s.run())
	ms := time.Millisecond
	assert.Equal(t, []answer{
		{0, 100 * ms, nil},                                 // 10 a second: 100 ms each
		{time.Second, 1500 * ms, nil},                      // 2 a second in the drop: 500 ms each
		{time.Second, 1700 * ms, context.DeadlineExceeded}, // its turn ends at 2 s, after its deadline
		{time.Second, 1700 * ms, context.DeadlineExceeded},
	}, got)
	assert.Equal(t, 2100*ms, d.busy, "the third served to 2 s, the fourth after the drop, at 10 a second")
}
