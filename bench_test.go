package retry_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrystats"
	"github.com/steadfast-go/retry/retrytest/parkcost"
)

// sink keeps results alive so the compiler cannot drop the calls.
var sink error

// opName is a name that is not a constant: an Option holds a name
// without an allocation of its own.
var opName = "charge-card"

// succeed is the cheapest possible fn. The baseline calls it through a
// func value, as Do does, so neither side gets it inlined.
func succeed(context.Context) error { return nil }

var succeedFn = succeed

// threeFailures fails on the first three of every four calls.
type threeFailures struct{ n int }

func (f *threeFailures) call(context.Context) error {
	f.n++
	if f.n%4 != 0 {
		return errTransient
	}
	return nil
}

func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates; run without -race")
	}
	ctx := context.Background()
	// r has New's default budget; noBudget shows the loop's own cost, since
	// three failures per call would soon empty a budget.
	r := mustNew(t, retry.WithMaxAttempts(5), retry.WithBackoff(retry.Constant(0)))
	noBudget := mustNew(t, retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithMaxAttempts(5), retry.WithBackoff(retry.Constant(0)))
	f := &threeFailures{}
	limited := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Limit: newAdaptive(t)}), retry.WithMaxAttempts(5), retry.WithBackoff(retry.Constant(0)))
	limitedFailing := &threeFailures{}
	paced := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Pause: newPause(t), Rate: newRate(t), Limit: newAdaptive(t)}),
		retry.WithMaxAttempts(5), retry.WithBackoff(retry.Constant(0)))
	pacedFailing := &threeFailures{}
	value := func(context.Context) (int, error) { return 1, nil }
	// Idempotent calls on memstore, as doc.go counts them: a first-time
	// key each run (completed with a retention of 1 ns, so that the store
	// stays small), and the replay of one completed key.
	idem := mustNew(t, retry.WithIdempotency(memstore.New(nil), &retry.IdempotencyOptions{Retention: time.Nanosecond}))
	fresh := make([]context.Context, 100+1001) // AllocsPerRun's warm-up run and its 1,000
	for i := range fresh {
		fresh[i] = retry.ContextWithIdempotencyKey(ctx, "first-"+strconv.Itoa(i))
	}
	nextFresh := 100
	for _, ctx := range fresh[:nextFresh] { // past the tokens strconv has ready-made (below 100)
		_, err := retry.DoValueOn(ctx, idem, value)
		require.NoError(t, err)
	}
	replayed := mustNew(t, retry.WithIdempotency(memstore.New(nil), nil))
	replayCtx := retry.ContextWithIdempotencyKey(ctx, "done")
	_, err := retry.DoValueOn(replayCtx, replayed, value)
	require.NoError(t, err)
	cases := []struct {
		name       string
		wantAllocs float64
		fn         func()
	}{
		{"retrier_first_try_success", 0, func() { sink = r.Do(ctx, succeed) }},
		{"retrier_value_first_try_success", 0, func() { _, sink = retry.DoValueOn(ctx, r, value) }},
		{"retrier_three_failures_zero_waits", 0, func() { sink = noBudget.Do(ctx, f.call) }},
		{"retrier_limited_first_try_success", 0, func() { sink = limited.Do(ctx, succeed) }},
		{"retrier_limited_three_failures_zero_waits", 0, func() { sink = limited.Do(ctx, limitedFailing.call) }},
		{"retrier_paced_first_try_success", 0, func() { sink = paced.Do(ctx, succeed) }},
		{"retrier_paced_three_failures_zero_waits", 0, func() { sink = paced.Do(ctx, pacedFailing.call) }},
		{"package_do_three_options", 1, func() { // the backoff boxed into its interface: 24 B where the option is built
			// What users write, as BenchmarkDo_threeOptions does.
			sink = retry.Do(ctx, succeed,
				retry.WithBackoff(retry.Exponential(100*time.Millisecond, 2, 5*time.Second)),
				retry.WithJitter(retry.FullJitter),
				retry.WithMaxAttempts(5))
		}},
		{"package_do_linear", 1, func() { // the backoff boxed into its interface: 24 B where the option is built
			sink = retry.Do(ctx, succeed, retry.WithBackoff(retry.Linear(100*time.Millisecond, 100*time.Millisecond, time.Second)))
		}},
		{"package_do_decorrelated", 1, func() { // the backoff boxed into its interface: 24 B where the option is built
			sink = retry.Do(ctx, succeed, retry.WithBackoff(retry.Decorrelated(100*time.Millisecond, 5*time.Second)))
		}},
		{"package_do_three_options_zero_backoff", 0, func() {
			sink = retry.Do(ctx, succeed, retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)), retry.WithJitter(retry.NoJitter))
		}},
		{"package_do_named", 0, func() { sink = retry.Do(ctx, succeed, retry.WithName(opName)) }},
		{"package_do_value", 0, func() { _, sink = retry.DoValue(ctx, value) }},
		{"package_do_value_three_options", 0, func() {
			_, sink = retry.DoValue(ctx, value, retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)), retry.WithJitter(retry.NoJitter))
		}},
		{"package_do_limits_turned_off", 0, func() {
			sink = retry.Do(ctx, succeed, retry.WithMaxElapsed(0), retry.WithAttemptTimeout(0))
		}},
		{"idempotent_first_time_key", 6, func() { // the call's state, fn's context and its cancel, the token, the value and the store's copy
			_, sink = retry.DoValueOn(fresh[nextFresh], idem, value)
			nextFresh++
		}},
		{"idempotent_replay", 2, func() { _, sink = retry.DoValueOn(replayCtx, replayed, value) }}, // the decoded value's
		{"backoff_delay", 0, func() {
			_ = retry.Exponential(time.Millisecond, 2, time.Second).Delay(7, 0, 0.5)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := testing.AllocsPerRun(1000, tc.fn)
			assert.LessOrEqual(t, got, tc.wantAllocs)
		})
	}
	require.NoError(t, noBudget.Do(ctx, f.call), "the failing fn still ends in success")
}

func BenchmarkDirect(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		sink = succeedFn(ctx)
	}
}

// BenchmarkRetrierDo_firstTrySuccess has New's default budget, a Ratio,
// which a success tells with one atomic add on one of its 64 lines,
// inline; _noBudget and _tokenBucket show what that costs.
func BenchmarkRetrierDo_firstTrySuccess(b *testing.B) {
	ctx := context.Background()
	r := mustNew(b)
	b.ReportAllocs()
	for b.Loop() {
		sink = r.Do(ctx, succeedFn)
	}
}

func BenchmarkRetrierDo_firstTrySuccess_noBudget(b *testing.B) {
	ctx := context.Background()
	r := mustNew(b, retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
	b.ReportAllocs()
	for b.Loop() {
		sink = r.Do(ctx, succeedFn)
	}
}

// BenchmarkRetrierDo_firstTrySuccess_limit adds a concurrency limit,
// overload.Adaptive with its defaults, to New's default budget: what the
// limit costs a first try is the difference to firstTrySuccess.
func BenchmarkRetrierDo_firstTrySuccess_limit(b *testing.B) {
	ctx := context.Background()
	r := mustNew(b, retry.WithOverload(&retry.OverloadOptions{Limit: newAdaptive(b)}))
	b.ReportAllocs()
	for b.Loop() {
		sink = r.Do(ctx, succeedFn)
	}
}

// BenchmarkRetrierDo_firstTrySuccess_pause adds a shared pause, never
// in force, to New's default budget: its cost is one atomic load.
func BenchmarkRetrierDo_firstTrySuccess_pause(b *testing.B) {
	ctx := context.Background()
	r := mustNew(b, retry.WithOverload(&retry.OverloadOptions{Pause: newPause(b)}))
	b.ReportAllocs()
	for b.Loop() {
		sink = r.Do(ctx, succeedFn)
	}
}

// BenchmarkRetrierDo_firstTrySuccess_rate adds a rate, overload.Rate at a
// rate it never reaches, to New's default budget.
func BenchmarkRetrierDo_firstTrySuccess_rate(b *testing.B) {
	ctx := context.Background()
	r := mustNew(b, retry.WithOverload(&retry.OverloadOptions{Rate: newRate(b)}))
	b.ReportAllocs()
	for b.Loop() {
		sink = r.Do(ctx, succeedFn)
	}
}

// newPause is an overload.Pause with its defaults.
func newPause(t testing.TB) *overload.Pause {
	p, err := overload.NewPause(overload.PauseOptions{})
	require.NoError(t, err)
	return p
}

// newRate is an overload.Rate that admits a billion attempts a second.
func newRate(t testing.TB) *overload.Rate {
	r, err := overload.NewRate(overload.RateOptions{PerSecond: 1e9})
	require.NoError(t, err)
	return r
}

// newAdaptive is an overload.Adaptive with its defaults.
func newAdaptive(t testing.TB) *overload.Adaptive {
	l, err := overload.NewAdaptive(overload.AdaptiveOptions{})
	require.NoError(t, err)
	return l
}

// BenchmarkDo_threeOptions calls the package-level Do with the options
// users write, an Exponential backoff among them: a Constant(0) would
// hide the cost of a backoff with parameters, whose zero value the
// runtime puts in an interface without an allocation.
func BenchmarkDo_threeOptions(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		sink = retry.Do(ctx, succeed,
			retry.WithBackoff(retry.Exponential(100*time.Millisecond, 2, 5*time.Second)),
			retry.WithJitter(retry.FullJitter),
			retry.WithMaxAttempts(5))
	}
}

func BenchmarkRetrierDo_threeFailuresZeroWaits(b *testing.B) {
	ctx := context.Background()
	// No budget: three failures per call would soon empty one, and this
	// measures the loop.
	r := mustNew(b, retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithMaxAttempts(5), retry.WithBackoff(retry.Constant(0)))
	f := &threeFailures{}
	b.ReportAllocs()
	for b.Loop() {
		sink = r.Do(ctx, f.call)
	}
}

// BenchmarkRetrierDo_parallel shares one Retrier among all goroutines
// (-cpu 1,2 shows the scaling): a first-try success writes one line of
// the default Ratio's 64, picked by its goroutine's stack, and with Stats
// its goroutine's stripe of Stats' counters too, so both scale with the
// cores unless two goroutines pick one line. Direct is the floor.
func BenchmarkRetrierDo_parallel(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"direct", func() error { return succeedFn(ctx) }},
		{"no_observer", func() error { return parallelPlain.Do(ctx, succeed) }},
		{"stats", func() error { return parallelStats.Do(ctx, succeed) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var err error
				for pb.Next() {
					err = tc.do()
				}
				if err != nil {
					b.Error(err)
				}
			})
		})
	}
}

var (
	parallelPlain = func() *retry.Retrier { r, _ := retry.New(); return r }()
	parallelStats = func() *retry.Retrier { r, _ := retry.New(retry.WithObserver(new(retrystats.Stats))); return r }()
)

// BenchmarkHandLoop_threeFailures is the floor of the one above: a
// hand-written loop of the same four calls, with no waits, calling fn
// through a func value as Do does (so the compiler cannot inline it away).
func BenchmarkHandLoop_threeFailures(b *testing.B) {
	ctx := context.Background()
	f := &threeFailures{}
	handFn = f.call
	b.ReportAllocs()
	for b.Loop() {
		var err error
		for range 5 {
			if err = handFn(ctx); err == nil {
				break
			}
		}
		sink = err
	}
}

// handFn is a package variable so that calls through it stay indirect.
var handFn func(context.Context) error

// BenchmarkParkedCalls parks 100,000 calls in a one-hour wait, after one
// failed attempt, and reports what each holds once all are parked and a
// GC has run: its live heap and its goroutine's stack, separately, since
// a goroutine's stack is not heap. It then cancels the shared context and
// reports how long it takes until all have returned.
//
// Each configuration runs beside two references, measured the same way in
// the same iteration: the floor, the least a hand-written wait does for
// the same result (a time.Timer, a select on it and ctx.Done(), and
// context.Cause once the context is done), and the bare goroutine, which
// parks on ctx.Done() after the same failed call. All figures are
// absolute per goroutine: the stack is its whole stack (2,048 B unless it
// grew), the heap what it holds after the GC (the runtime reuses the
// goroutine descriptors of earlier runs, so they are not in it).
//
// measureParked says how a call counts as parked.
func BenchmarkParkedCalls(b *testing.B) {
	const n = 100_000
	// Warm up: the first 100,000 goroutines grow runtime tables that later
	// runs reuse, which would otherwise count against the first figures.
	measureParked(b, n, parkedBare)
	for _, c := range []struct {
		name string
		opts func() []retry.Option // called per measurement: a fresh store each time
		ctx  func(ctx context.Context, i int64) context.Context
	}{
		{name: "Do"},
		{name: "Do_observed", opts: func() []retry.Option {
			return []retry.Option{retry.WithObserver(new(retrystats.Stats))}
		}},
		{
			name: "Do_idempotent",
			// Each call its own key: it claims it, fails once, and parks
			// in the retry wait.
			opts: func() []retry.Option {
				return []retry.Option{retry.WithIdempotency(memstore.New(nil), nil)}
			},
			ctx: func(ctx context.Context, i int64) context.Context {
				return retry.ContextWithIdempotencyKey(ctx, "parked-"+strconv.FormatInt(i, 10))
			},
		},
	} {
		b.Run(c.name, func(b *testing.B) {
			do := func() func(context.Context) error {
				// No budget: it would refuse most of these retries.
				opts := []retry.Option{retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithBackoff(retry.Constant(time.Hour)), retry.WithJitter(retry.NoJitter), retry.WithMaxAttempts(2)}
				if c.opts != nil {
					opts = append(opts, c.opts()...)
				}
				r := mustNew(b, opts...)
				if c.ctx == nil {
					return func(ctx context.Context) error { return r.Do(ctx, parkedAttempt) }
				}
				var keys atomic.Int64
				return func(ctx context.Context) error { return r.Do(c.ctx(ctx, keys.Add(1)), parkedAttempt) }
			}
			for b.Loop() {
				got := measureParked(b, n, do())
				floor := measureParked(b, n, parkedFloor)
				bare := measureParked(b, n, parkedBare)
				got.Report(b, "")
				b.ReportMetric(got.StartStack, "new-goroutine-stack-B")
				floor.Report(b, "floor-")
				bare.Report(b, "goroutine-")
				b.ReportMetric(got.Total()/floor.Total(), "x-floor-total")
				b.ReportMetric(float64(got.Returned)/float64(floor.Returned), "x-floor-return")
			}
		})
	}
}

// parkedBare is the bare goroutine: the same failed call, then a park on
// the context.
func parkedBare(ctx context.Context) error {
	_ = parkedAttempt(ctx)
	<-ctx.Done()
	return ctx.Err()
}

// parkedFloor is the least a hand-written wait does for Do's result.
func parkedFloor(ctx context.Context) error {
	_ = parkedAttempt(ctx)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// parkedAttempts counts the calls of parkedAttempt, the failing attempt
// of the parked-call measures (one measure at a time).
var parkedAttempts atomic.Int64

func parkedAttempt(context.Context) error {
	parkedAttempts.Add(1)
	return errTransient
}

// measureParked measures n calls of call, each of which makes one
// parkedAttempt and then parks in a wait (with no jitter, every one does)
// until the context is done.
//
// They run on the real clock, as users' calls do, whose waits are plain
// time.Timers: a clock with a WaitArmed method, which would say when each
// call is parked, is a mock, whose timers cost more. Nor can they run in
// a synctest bubble (which has no form for benchmarks anyway), whose time
// has no monotonic reading: time.Since then takes a deeper path, which
// alone puts an observed call at 4 KB of stack. So "parked" is read from
// the scheduler: every call has made its attempt, and n goroutines more
// than before the measure, besides the ballast, are waiting.
func measureParked(tb testing.TB, n int, call func(context.Context) error) parkcost.Cost {
	tb.Helper()
	parkedAttempts.Store(0)
	runtime.GC() // its workers park: they are counted in before
	before := parkcost.Waiting()
	parked := func() {
		for deadline := time.Now().Add(time.Minute); parkedAttempts.Load() < int64(n) ||
			parkcost.Waiting() < before+parkcost.Ballast+uint64(n); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				tb.Fatalf("not parked after a minute: %d attempts for %d calls, %d goroutines waiting, %d before",
					parkedAttempts.Load(), n, parkcost.Waiting(), before)
			}
		}
	}
	c, err := parkcost.Measure(n, call, parked)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func failOnce(context.Context) error { return errTransient }

// BenchmarkRetrierDo_firstTrySuccess_tokenBucket has an
// overload.TokenBucket for budget, whose first-try success writes
// nothing: the default budget's cost is the difference.
func BenchmarkRetrierDo_firstTrySuccess_tokenBucket(b *testing.B) {
	ctx := context.Background()
	tb, err := overload.NewTokenBucket(overload.TokenBucketOptions{})
	require.NoError(b, err)
	r := mustNew(b, retry.WithOverload(&retry.OverloadOptions{Budget: tb}))
	b.ReportAllocs()
	for b.Loop() {
		sink = r.Do(ctx, succeedFn)
	}
}
