package overload_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry/overload"
)

var (
	first     = try{overload.Attempt{Kind: overload.FirstAttempt}, context.Background()}
	retried   = try{overload.Attempt{Kind: overload.RetryAttempt}, context.Background()}
	hedged    = try{overload.Attempt{Kind: overload.HedgeAttempt}, context.Background()}
	critical  = try{overload.Attempt{Kind: overload.FirstAttempt}, overload.WithCriticality(context.Background(), overload.Critical)}
	sheddable = try{overload.Attempt{Kind: overload.FirstAttempt}, overload.WithCriticality(context.Background(), overload.Sheddable)}
)

func newAdaptive(t *testing.T, o overload.AdaptiveOptions) *overload.Adaptive {
	t.Helper()
	l, err := overload.NewAdaptive(o)
	require.NoError(t, err)
	return l
}

// try is an attempt and the context of its call, which carries its
// criticality.
type try struct {
	a   overload.Attempt
	ctx context.Context
}

// on asks l for a permit for x.
func (x try) on(l overload.Limit) error { return l.Acquire(x.ctx, x.a) }

// acquireAll takes n permits for a and fails the test if one is refused.
func acquireAll(t *testing.T, l overload.Limit, a try, n int) {
	t.Helper()
	for i := range n {
		require.NoError(t, a.on(l), "permit %d", i+1)
	}
}

func TestNewAdaptive_refusesWhatItCannotUse(t *testing.T) {
	for name, tc := range map[string]struct {
		o    overload.AdaptiveOptions
		want string
	}{
		"min above initial":   {overload.AdaptiveOptions{Min: 30, Initial: 20}, "Min 30, Initial 20"},
		"initial above max":   {overload.AdaptiveOptions{Initial: 300, Max: 200}, "Initial 300 and Max 200"},
		"negative min":        {overload.AdaptiveOptions{Min: -1}, "Min -1"},
		"max too large":       {overload.AdaptiveOptions{Max: 1 << 21}, "Max 2097152"},
		"backoff of one":      {overload.AdaptiveOptions{Backoff: 1}, "Backoff 1"},
		"negative backoff":    {overload.AdaptiveOptions{Backoff: -0.5}, "Backoff -0.5"},
		"failed share of one": {overload.AdaptiveOptions{FailedShare: 1}, "FailedShare 1 must be in (0, 1)"},
		"latency in ns":       {overload.AdaptiveOptions{MaxLatency: 500}, "MaxLatency 500ns is below 1ms"},
		"negative queue":      {overload.AdaptiveOptions{MaxQueued: -1}, "MaxQueued -1"},
		"queue timeout in ns": {overload.AdaptiveOptions{QueueTimeout: 30}, "QueueTimeout 30ns is below 1ms"},
		"nil mock clock":      {overload.AdaptiveOptions{Clock: (*clock.Mock)(nil)}, "Clock (*clock.Mock)(nil)"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := overload.NewAdaptive(tc.o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestNewAdaptive_defaults(t *testing.T) {
	assert.Equal(t, overload.LimitStats{Limit: 20}, newAdaptive(t, overload.AdaptiveOptions{}).Stats())
	assert.Equal(t, 5, newAdaptive(t, overload.AdaptiveOptions{Max: 5}).Stats().Limit, "a Max alone moves Initial below it")
	assert.Equal(t, 50, newAdaptive(t, overload.AdaptiveOptions{Min: 50}).Stats().Limit, "a Min alone moves Initial above it")
}

func TestAdaptive_zeroValueRefusesEveryAttempt(t *testing.T) {
	var l overload.Adaptive
	assert.ErrorIs(t, first.on(&l), overload.ErrLimitExceeded)
	assert.Equal(t, overload.LimitStats{Refused: 1}, l.Stats())
}

func TestAdaptive_fixedLimitBoundsAttemptsInFlight(t *testing.T) {
	l := newAdaptive(t, overload.AdaptiveOptions{Min: 3, Max: 3})
	acquireAll(t, l, first, 3)
	assert.ErrorIs(t, first.on(l), overload.ErrLimitExceeded)
	l.Release(overload.Answered, 0)
	assert.NoError(t, first.on(l), "a released permit is free again")
	assert.Equal(t, overload.LimitStats{Limit: 3, InFlight: 3, Refused: 1}, l.Stats())
}

func TestAdaptive_retriesHedgesAndSheddableAreShedFirst(t *testing.T) {
	for _, a := range []try{retried, hedged, sheddable} {
		l := newAdaptive(t, overload.AdaptiveOptions{Min: 20, Max: 20})
		acquireAll(t, l, a, 18)
		assert.ErrorIs(t, a.on(l), overload.ErrLimitExceeded, "nine tenths of the limit for %+v", a)
		acquireAll(t, l, first, 2)
		assert.ErrorIs(t, critical.on(l), overload.ErrLimitExceeded)
	}
}

// window ends one window of the limit's size with failed of its attempts
// failing, holding busy permits in flight while it does.
func window(t *testing.T, l *overload.Adaptive, failed, busy int) {
	t.Helper()
	lim := l.Stats().Limit
	acquireAll(t, l, first, busy)
	for i := range lim {
		require.NoError(t, first.on(l))
		r := overload.Answered
		if i < failed {
			r = overload.Failed
		}
		l.Release(r, 0)
	}
	for range busy {
		l.Release(overload.Dropped, 0)
	}
}

func TestAdaptive_adaptsOncePerWindow(t *testing.T) {
	l := newAdaptive(t, overload.AdaptiveOptions{Initial: 20})
	window(t, l, 0, 10)
	assert.Equal(t, 21, l.Stats().Limit, "a busy window without failures grows the limit by one")
	window(t, l, 0, 0)
	assert.Equal(t, 21, l.Stats().Limit, "an idle window leaves it")
	window(t, l, 2, 5)
	assert.Equal(t, 21, l.Stats().Limit, "2 failures of 21 are not more than a tenth, and 6 of 21 in flight is not busy")
	window(t, l, 3, 10)
	assert.Equal(t, 16, l.Stats().Limit, "3 of 21 multiply it by 0.8")
	for range 30 {
		window(t, l, 16, 0)
	}
	assert.Equal(t, 1, l.Stats().Limit, "never below Min")
}

func TestAdaptive_droppedAttemptsTeachNothing(t *testing.T) {
	l := newAdaptive(t, overload.AdaptiveOptions{Initial: 4})
	for range 40 {
		acquireAll(t, l, first, 4)
		for range 4 {
			l.Release(overload.Dropped, 0)
		}
	}
	assert.Equal(t, overload.LimitStats{Limit: 4}, l.Stats())
}

func TestAdaptive_maxLatencyCountsASlowAnswerAsFailed(t *testing.T) {
	l := newAdaptive(t, overload.AdaptiveOptions{Initial: 10, MaxLatency: 100 * time.Millisecond})
	assert.True(t, l.Timed())
	assert.False(t, newAdaptive(t, overload.AdaptiveOptions{}).Timed())
	acquireAll(t, l, first, 10)
	for range 10 {
		l.Release(overload.Answered, 150*time.Millisecond)
	}
	assert.Equal(t, 8, l.Stats().Limit)
}

func TestAdaptive_queueHandsAReleasedPermitOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newAdaptive(t, overload.AdaptiveOptions{Min: 1, Max: 1, MaxQueued: 2, QueueTimeout: time.Second})
		acquireAll(t, l, first, 1)
		got := make(chan error, 1)
		go func() { got <- first.on(l) }()
		synctest.Wait()
		assert.Equal(t, 1, l.Stats().Queued)
		assert.ErrorIs(t, retried.on(l), overload.ErrLimitExceeded, "a retry never queues")
		l.Release(overload.Answered, 0)
		assert.NoError(t, <-got)
		assert.Equal(t, overload.LimitStats{Limit: 1, InFlight: 1, Refused: 1}, l.Stats())
	})
}

// TestAdaptive_queueTakesTheRoomALimitGrowsBy: when the limit grows
// while first attempts wait, they take the new room at once, not one per
// later release: otherwise the attempts in flight stay where they were
// when the queue formed, and that level, kept at half the limit, grows
// the limit on no evidence of the downstream.
func TestAdaptive_queueTakesTheRoomALimitGrowsBy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newAdaptive(t, overload.AdaptiveOptions{Initial: 2, MaxQueued: 4, QueueTimeout: time.Minute})
		acquireAll(t, l, first, 2)
		got := make(chan error, 3)
		for range 3 {
			go func() { got <- first.on(l) }()
		}
		synctest.Wait()
		require.Equal(t, overload.LimitStats{Limit: 2, InFlight: 2, Queued: 3}, l.Stats())
		l.Release(overload.Answered, 0) // handed over: 2 in flight, 2 queued
		require.NoError(t, <-got)
		l.Release(overload.Answered, 0) // handed over, and closes a busy window: the limit is 3
		require.NoError(t, <-got)
		synctest.Wait()
		select {
		case err := <-got:
			assert.NoError(t, err, "the last waiter takes the room the limit grew by")
		default:
			t.Error("the last waiter still waits, with room for it")
			<-got // until its queue timeout
		}
		assert.Equal(t, overload.LimitStats{Limit: 3, InFlight: 3}, l.Stats())
	})
}

func TestAdaptive_queueIsBoundedInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newAdaptive(t, overload.AdaptiveOptions{Min: 1, Max: 1, MaxQueued: 1, QueueTimeout: time.Second})
		acquireAll(t, l, first, 1)
		start := time.Now()
		assert.ErrorIs(t, first.on(l), overload.ErrLimitExceeded)
		assert.Equal(t, time.Second, time.Since(start))

		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start = time.Now()
		assert.ErrorIs(t, l.Acquire(ctx, first.a), overload.ErrLimitExceeded)
		assert.Equal(t, 300*time.Millisecond, time.Since(start), "within the call's deadline")
		assert.Equal(t, overload.LimitStats{Limit: 1, InFlight: 1, Refused: 2}, l.Stats())
	})
}

func TestAdaptive_criticalAttemptsAreServedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newAdaptive(t, overload.AdaptiveOptions{Min: 1, Max: 1, MaxQueued: 2, QueueTimeout: time.Minute})
		acquireAll(t, l, first, 1)
		var order []string
		var mu sync.Mutex
		wait := func(name string, a try) {
			err := a.on(l)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				name += " refused"
			}
			order = append(order, name)
			if err == nil {
				l.Release(overload.Answered, 0)
			}
		}
		go wait("default 1", first)
		synctest.Wait()
		go wait("default 2", first)
		synctest.Wait()
		go wait("critical", critical) // the queue is full: it puts default 2 out
		synctest.Wait()
		l.Release(overload.Answered, 0)
		synctest.Wait()
		assert.Equal(t, []string{"default 2 refused", "critical", "default 1"}, order)
	})
}

func TestAdaptive_concurrentAttemptsNeverPassTheLimit(t *testing.T) {
	l := newAdaptive(t, overload.AdaptiveOptions{Initial: 8, Min: 2, Max: 16, MaxQueued: 4, QueueTimeout: time.Millisecond})
	var inFlight, peak atomic.Int64
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := range 500 {
				a := []try{first, retried, hedged, critical, sheddable}[(w+i)%5]
				if a.on(l) != nil {
					continue
				}
				n := inFlight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				inFlight.Add(-1)
				l.Release([]overload.Result{overload.Answered, overload.Failed, overload.Dropped}[i%3], 0)
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, peak.Load(), int64(16), "never more in flight than the largest limit")
	s := l.Stats()
	assert.Equal(t, 0, s.InFlight)
	assert.Equal(t, 0, s.Queued)
	assert.GreaterOrEqual(t, s.Limit, 2)
}

func TestAdaptive_queueRunsOnTheGivenClock(t *testing.T) {
	mock := clock.NewMock()
	l := newAdaptive(t, overload.AdaptiveOptions{Min: 1, Max: 1, MaxQueued: 1, QueueTimeout: time.Second, Clock: mock})
	acquireAll(t, l, first, 1)
	got := make(chan error, 1)
	go func() { got <- first.on(l) }()
	for l.Stats().Queued == 0 {
		time.Sleep(time.Millisecond)
	}
	mock.Add(999 * time.Millisecond)
	select {
	case err := <-got:
		t.Fatalf("refused before its QueueTimeout: %v", err)
	case <-time.After(5 * time.Millisecond):
	}
	mock.Add(time.Millisecond)
	assert.ErrorIs(t, <-got, overload.ErrLimitExceeded)
}

// TestAdaptive_growsFromItsMinimum: a limit at 1, whose one permit is
// always in use, grows again: the attempt that closes a window was in
// flight too, though it has left by then.
func TestAdaptive_growsFromItsMinimum(t *testing.T) {
	l := newAdaptive(t, overload.AdaptiveOptions{Initial: 1})
	for range 3 {
		acquireAll(t, l, first, l.Stats().Limit)
		for range l.Stats().Limit {
			l.Release(overload.Answered, 0)
		}
	}
	assert.Greater(t, l.Stats().Limit, 1)
}

// TestAdaptive_failedShareSaysWhatOverloadIs: with FailedShare 0.4, a
// downstream that fails three tenths of its attempts at random keeps a
// growing limit; at the default it would fall.
func TestAdaptive_failedShareSaysWhatOverloadIs(t *testing.T) {
	for share, grows := range map[float64]bool{0: false, 0.4: true} {
		l := newAdaptive(t, overload.AdaptiveOptions{FailedShare: share})
		for range 10 {
			lim := l.Stats().Limit
			window(t, l, lim*3/10, lim/2)
		}
		assert.Equal(t, grows, l.Stats().Limit > 20, "FailedShare %v: limit %d", share, l.Stats().Limit)
	}
}
