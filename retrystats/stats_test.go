package retrystats_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrymetrics/metricstest"
	"github.com/steadfast-go/retry/retrystats"
)

var errFlaky = metricstest.ErrFlaky

// truth is what the conservation test counts on its own, to compare with
// what Stats counted.
type truth struct {
	calls    uint64
	attempts uint64 // calls of fn
	outcomes [8]uint64
	perCall  map[int]uint64 // attempts per call -> calls
}

func (t *truth) add(o truth) {
	t.calls += o.calls
	t.attempts += o.attempts
	for i := range t.outcomes {
		t.outcomes[i] += o.outcomes[i]
	}
	for k, v := range o.perCall {
		t.perCall[k] += v
	}
}

// TestStats_conservation runs 100,000 calls with random policies, failures,
// cancellations and deadlines from concurrent callers sharing one Stats,
// and checks that Stats counted exactly what happened. The seed is fixed,
// so a failure can be replayed.
//
// Under the race detector it runs 10,000 calls: with Go 1.26.8, 100,000
// calls' timers in one synctest bubble crash the race runtime now and then
// (SIGSEGV inside synctest.Run, about one run in 20, never without -race).
// scripts/test.sh runs the root module once more without -race, which
// makes the full 100,000 calls.
func TestStats_conservation(t *testing.T) {
	calls := 100_000
	if raceEnabled {
		calls = 10_000
	}
	const callers = 8
	perCaller := calls / callers
	const seed = 20261129
	synctest.Test(t, func(t *testing.T) {
		stats := new(retrystats.Stats)
		var mu sync.Mutex
		total := truth{perCall: map[int]uint64{}}
		var wg sync.WaitGroup
		for g := range callers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(seed, uint64(g)))
				mine := truth{perCall: map[int]uint64{}}
				for range perCaller {
					randomCall(t, rng, stats, &mine)
				}
				mu.Lock()
				total.add(mine)
				mu.Unlock()
			})
		}
		// Snapshots taken while calls run stay within bounds.
		done := make(chan struct{})
		var peeks int
		peeker := make(chan struct{})
		go func() {
			defer close(peeker)
			for {
				select {
				case <-done:
					return
				case <-time.After(100 * time.Millisecond):
				}
				s := stats.Snapshot()
				peeks++
				// Fields are read one by one, so InFlight may count calls
				// started after others ended; it is never below the truth.
				assert.GreaterOrEqual(t, s.InFlight, int64(0))
				assert.True(t, s.Waiting >= 0 && s.Waiting <= callers && s.Waiting <= s.InFlight,
					"waiting %d, in flight %d", s.Waiting, s.InFlight)
			}
		}()
		wg.Wait()
		close(done)
		<-peeker
		assert.Greater(t, peeks, 100)

		s := stats.Snapshot()
		assert.Equal(t, total.calls, s.Calls(), "calls")
		assert.Equal(t, total.attempts, s.Attempts, "attempts")
		for o := retry.OutcomeSuccess; o <= retry.OutcomeCanceled; o++ {
			assert.Equal(t, total.outcomes[o], s.Outcome(o), "outcome %s", o)
		}
		assert.Equal(t, total.perCall[0], s.NoAttempt, "calls without attempt")
		assert.Equal(t, s.Attempts-(s.Calls()-s.NoAttempt), s.Retries, "retries = attempts - calls that started")
		assert.Equal(t, int64(0), s.InFlight, "in flight")
		assert.Equal(t, int64(0), s.Waiting, "waiting")

		var want [9]uint64
		bounds := s.AttemptBounds
		for n, c := range total.perCall {
			i := len(bounds)
			for j, b := range bounds {
				if n <= b {
					i = j
					break
				}
			}
			want[i] += c
		}
		assert.Equal(t, want, s.AttemptsPerCall, "attempts per call")
		var durations uint64
		for _, c := range s.Duration {
			durations += c
		}
		assert.Equal(t, s.Calls(), durations, "duration histogram count")
		// Every outcome and both ways of ending a wait must have happened,
		// or the test proved less than it claims.
		for o := retry.OutcomeSuccess; o <= retry.OutcomeCanceled; o++ {
			assert.NotZero(t, s.Outcome(o), "no call ended %s", o)
		}
		assert.NotZero(t, s.NoAttempt)
	})
}

// randomCall makes one call of Do with a random policy and fate, and
// records what happened in tr.
func randomCall(t *testing.T, rng *rand.Rand, stats *retrystats.Stats, tr *truth) {
	delay := time.Duration(rng.IntN(3)) * time.Second // 0 half the time: zero-delay retries
	opts := []retry.Option{
		retry.WithObserver(stats),
		retry.WithMaxAttempts(1 + rng.IntN(6)),
		retry.WithBackoff(retry.Constant(delay)),
		retry.WithJitter(retry.NoJitter),
	}
	if rng.IntN(8) == 0 {
		opts = append(opts, retry.WithMaxElapsed(time.Duration(1+rng.IntN(4))*time.Second))
	}
	if rng.IntN(20) == 0 {
		opts = append(opts, retry.WithMaxAttempts(math.MaxInt))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	switch rng.IntN(10) {
	case 0:
		cancel() // before the first attempt
	case 1:
		// Cancel on a whole second: the same instant as a wait's end.
		stop := time.AfterFunc(time.Duration(rng.IntN(4))*time.Second, cancel)
		defer stop.Stop()
	case 2:
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeout(ctx, time.Duration(rng.IntN(5))*time.Second+time.Duration(rng.IntN(2))*time.Millisecond)
		defer c2()
	}
	succeedAt := 1 + rng.IntN(8) // may be past the attempt limit
	permanentAt := 0
	if rng.IntN(6) == 0 {
		permanentAt = 1 + rng.IntN(3)
	}
	var n int
	err := retry.Do(ctx, func(context.Context) error {
		n++
		switch {
		case n == permanentAt:
			return retry.Permanent(errFlaky)
		case n >= succeedAt:
			return nil
		}
		return errFlaky
	}, opts...)

	tr.calls++
	tr.attempts += uint64(n)
	tr.perCall[n]++
	if err == nil {
		tr.outcomes[retry.OutcomeSuccess]++
		return
	}
	// assert, not require: this runs on a caller goroutine, and FailNow
	// belongs to the test's own.
	var re *retry.Error
	if assert.ErrorAs(t, err, &re) && assert.Equal(t, n, re.Attempts) {
		tr.outcomes[re.Outcome]++
	}
}

// TestStats_gauges checks InFlight and Waiting while calls wait, and that
// both return to 0.
func TestStats_gauges(t *testing.T) {
	t.Parallel()
	stats := new(retrystats.Stats)
	metricstest.Gauges(t, stats,
		func() float64 { return float64(stats.Snapshot().InFlight) },
		func() float64 { return float64(stats.Snapshot().Waiting) })
	s := stats.Snapshot()
	assert.Equal(t, uint64(10), s.Deadline)
	assert.Equal(t, uint64(10), s.Canceled)
	assert.Equal(t, uint64(40), s.Attempts)
}

// TestStats_sameInstant makes a wait end at the instant its call is
// cancelled, 200 times: Do's select picks either at random, and the gauge
// of waits must come back to 0 both ways (the timer's way ends the call at
// the top of the loop, after the wait).
func TestStats_sameInstant(t *testing.T) {
	t.Parallel()
	stats := new(retrystats.Stats)
	for range 200 {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			err := retry.Do(ctx, func(context.Context) error { return errFlaky },
				retry.WithObserver(stats), retry.WithMaxAttempts(2),
				retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter),
				retry.WithClock(armedClock{clock.New(), func(d time.Duration) {
					cancel()
					time.Sleep(d) // the timer has fired too
				}}))
			require.ErrorIs(t, err, context.Canceled)
		})
	}
	s := stats.Snapshot()
	assert.Equal(t, int64(0), s.Waiting)
	assert.Equal(t, int64(0), s.InFlight)
	assert.Equal(t, uint64(200), s.Canceled)
	assert.Equal(t, uint64(200), s.Attempts)
}

// armedClock is the real clock (synctest's fake time in a bubble) with a
// WaitArmed hook, which Do calls once it has armed each wait.
type armedClock struct {
	clock.Clock
	armed func(d time.Duration)
}

func (c armedClock) WaitArmed(d time.Duration) { c.armed(d) }

func TestStats_deadLettersAndBuckets(t *testing.T) {
	t.Parallel()
	s := new(retrystats.Stats)
	ctx := t.Context()
	s.OnDone(ctx, retry.Done{Outcome: retry.OutcomeExhausted, Attempts: 1000, Elapsed: time.Minute, DeadLettered: true})
	s.OnDone(ctx, retry.Done{Outcome: retry.OutcomePermanent, Attempts: 1001, Elapsed: time.Minute + 1, DeadLetterFailed: true})
	s.OnDone(ctx, retry.Done{Outcome: retry.OutcomeCanceled, Attempts: 0, Elapsed: 0})
	s.OnDone(ctx, retry.Done{Outcome: retry.OutcomeSuccess, Attempts: 6, Elapsed: time.Millisecond + 1})
	snap := s.Snapshot()
	assert.Equal(t, uint64(1), snap.DeadLettersRecorded)
	assert.Equal(t, uint64(1), snap.DeadLettersFailed)
	assert.Equal(t, [9]uint64{1, 0, 0, 0, 0, 1, 0, 1, 1}, snap.AttemptsPerCall)
	assert.Equal(t, [15]uint64{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, snap.Duration)
	assert.Equal(t, 2*time.Minute+time.Millisecond+2, snap.DurationSum)
	assert.Equal(t, [8]int{1, 2, 3, 4, 5, 10, 100, 1000}, snap.AttemptBounds)
	assert.Equal(t, uint64(4), snap.Calls())
	assert.Equal(t, uint64(1), snap.NoAttempt)
}

func TestStats_noAllocation(t *testing.T) {
	stats := new(retrystats.Stats)
	metricstest.NoAllocation(t, stats)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = stats.Snapshot() }))
}

// TestStats_refusals counts calls a budget, a breaker, a limit, a rate or
// a pause refused, by who refused them.
func TestStats_refusals(t *testing.T) {
	t.Parallel()
	stats := new(retrystats.Stats)
	metricstest.Refusals(t, stats,
		func() float64 { return float64(stats.Snapshot().InFlight) },
		func() float64 { return float64(stats.Snapshot().Waiting) })
	s := stats.Snapshot()
	assert.Equal(t, uint64(5), s.Refused)
	assert.Equal(t, uint64(1), s.BudgetDenied)
	assert.Equal(t, uint64(1), s.CircuitOpen)
	assert.Equal(t, uint64(1), s.LimitRefused)
	assert.Equal(t, uint64(1), s.RateLimited)
	assert.Equal(t, uint64(1), s.Paused)
	assert.Equal(t, uint64(5), s.Calls())
	assert.Equal(t, uint64(4), s.Attempts)
	assert.Equal(t, uint64(1), s.Retries)
	assert.Equal(t, uint64(2), s.NoAttempt, "the breaker's and the pause's refusals came before any attempt")
}

// TestStats_refusedBy: a refusal counts once, by the first of budget,
// breaker, limit, rate and pause its error matches, and one that matches
// none counts in Refused only; other outcomes' errors are not looked at.
func TestStats_refusedBy(t *testing.T) {
	t.Parallel()
	stats := new(retrystats.Stats)
	for _, err := range []error{
		overload.ErrLimitExceeded,
		fmt.Errorf("limit of payments-api: %w", overload.ErrLimitExceeded),
		errors.Join(overload.ErrLimitExceeded, overload.ErrBudgetExhausted),
		errors.Join(overload.ErrLimitExceeded, overload.ErrCircuitOpen),
		errors.Join(overload.ErrRateLimited, overload.ErrLimitExceeded),
		fmt.Errorf("rate of payments-api: %w", overload.ErrRateLimited),
		errors.Join(overload.ErrPaused, overload.ErrRateLimited),
		overload.ErrPaused,
		retry.After(overload.ErrPaused, time.Second),
		errors.New("a limit of one's own"),
		nil,
	} {
		stats.OnDone(t.Context(), retry.Done{Outcome: retry.OutcomeRefused, Attempts: 1, Err: err})
	}
	stats.OnDone(t.Context(), retry.Done{Outcome: retry.OutcomeExhausted, Attempts: 1, Err: overload.ErrLimitExceeded})
	stats.OnDone(t.Context(), retry.Done{Outcome: retry.OutcomeDeadline, Attempts: 1, Err: overload.ErrPaused})
	stats.OnDone(t.Context(), retry.Done{Outcome: retry.OutcomeExhausted, Attempts: 1, Err: overload.ErrRateLimited})
	s := stats.Snapshot()
	assert.Equal(t, uint64(11), s.Refused)
	assert.Equal(t, uint64(3), s.LimitRefused)
	assert.Equal(t, uint64(1), s.BudgetDenied)
	assert.Equal(t, uint64(1), s.CircuitOpen)
	assert.Equal(t, uint64(2), s.RateLimited)
	assert.Equal(t, uint64(2), s.Paused)
}

// TestStats_refusedByNeverExceedsRefused takes snapshots while calls are
// refused: the refusals by who refused them never add up to more than
// Refused, which is counted first and read last.
func TestStats_refusedByNeverExceedsRefused(t *testing.T) {
	t.Parallel()
	stats := new(retrystats.Stats)
	errs := []error{overload.ErrBudgetExhausted, overload.ErrCircuitOpen, overload.ErrLimitExceeded, overload.ErrRateLimited, overload.ErrPaused}
	const perCaller = 20_000
	var wg sync.WaitGroup
	for _, err := range errs {
		wg.Go(func() {
			for range perCaller {
				stats.OnDone(t.Context(), retry.Done{Outcome: retry.OutcomeRefused, Err: err})
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		s := stats.Snapshot()
		if by := s.BudgetDenied + s.CircuitOpen + s.LimitRefused + s.RateLimited + s.Paused; by > s.Refused {
			t.Fatalf("refusals by who refused them: %d, more than Refused, %d", by, s.Refused)
		}
	}
	s := stats.Snapshot()
	assert.Equal(t, uint64(len(errs)*perCaller), s.Refused)
	assert.Equal(t, s.Refused, s.BudgetDenied+s.CircuitOpen+s.LimitRefused+s.RateLimited+s.Paused)
	for _, by := range []uint64{s.BudgetDenied, s.CircuitOpen, s.LimitRefused, s.RateLimited, s.Paused} {
		assert.Equal(t, uint64(perCaller), by)
	}
}

// TestSnapshot_outcome: Outcome(o) is the named field of o, for every
// outcome, in a snapshot Stats made and in one built by hand; Calls is
// their sum, and an outcome beyond the known ones counts 0.
func TestSnapshot_outcome(t *testing.T) {
	t.Parallel()
	stats := new(retrystats.Stats)
	for o := retry.OutcomeSuccess; o <= retry.OutcomeHandedOff; o++ {
		for range int(o) + 1 {
			stats.OnDone(t.Context(), retry.Done{Outcome: o, Attempts: 1})
		}
	}
	stats.OnDone(t.Context(), retry.Done{Outcome: retry.OutcomeHandedOff + 1, Attempts: 1})
	byHand := retrystats.Snapshot{Success: 1, Permanent: 2, Exhausted: 3, MaxElapsed: 4, Deadline: 5, Canceled: 6, Refused: 7, Unknown: 8, HandedOff: 9}
	for name, s := range map[string]retrystats.Snapshot{"stats": stats.Snapshot(), "by hand": byHand} {
		fields := map[retry.Outcome]uint64{
			retry.OutcomeSuccess: s.Success, retry.OutcomePermanent: s.Permanent,
			retry.OutcomeExhausted: s.Exhausted, retry.OutcomeMaxElapsed: s.MaxElapsed,
			retry.OutcomeDeadline: s.Deadline, retry.OutcomeCanceled: s.Canceled,
			retry.OutcomeRefused: s.Refused, retry.OutcomeUnknown: s.Unknown,
			retry.OutcomeHandedOff: s.HandedOff,
		}
		for o := retry.OutcomeSuccess; o <= retry.OutcomeHandedOff; o++ {
			assert.Equal(t, uint64(o)+1, s.Outcome(o), "%s: Outcome(%s)", name, o)
			assert.Equal(t, fields[o], s.Outcome(o), "%s: Outcome(%s) is its field", name, o)
		}
		assert.Zero(t, s.Outcome(retry.OutcomeHandedOff+1), name)
		assert.Zero(t, s.Outcome(255), name)
		assert.Equal(t, uint64(45), s.Calls(), name)
	}
}
