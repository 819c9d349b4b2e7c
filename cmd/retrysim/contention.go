package main

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/steadfast-go/retry"
)

// Scenario a, Brooker's contention model ("Exponential Backoff And
// Jitter", AWS Architecture Blog, 2015, and its simulator): N clients
// each update one row once, with optimistic concurrency. An attempt reads
// the row's version and writes it back; the write succeeds only if no
// other write came in between, so one client succeeds per round. Each
// message takes |N(10 ms, 2 ms)| on the network, as in the simulator.
// Clients retry until they succeed (no attempt limit, no budget), waiting
// min(cap, base·2ⁿ) after their n-th failure (base 5 ms, cap 2 s), with
// the jitter under test; decorrelated jitter draws from [base, 3·previous
// wait] instead.

// contentionParams configures scenario a.
type contentionParams struct {
	clients int
	runs    int
	seed    uint64
	base    time.Duration
	cap     time.Duration
	workers int // simulations run at once; 0: GOMAXPROCS
}

// strategy is a jitter strategy of scenario a.
type strategy struct {
	name string
	opts func(p contentionParams) []retry.Option
}

// strategies are Brooker's, each as the library's options. The
// library's Exponential(initial, 2, cap) waits initial·2ⁿ⁻¹ after the n-th
// failure, so initial is 2·base for Brooker's base·2ⁿ.
var strategies = []strategy{
	{"no jitter", func(p contentionParams) []retry.Option {
		return []retry.Option{retry.WithBackoff(retry.Exponential(2*p.base, 2, p.cap)), retry.WithJitter(retry.NoJitter)}
	}},
	{"full jitter", func(p contentionParams) []retry.Option {
		return []retry.Option{retry.WithBackoff(retry.Exponential(2*p.base, 2, p.cap)), retry.WithJitter(retry.FullJitter)}
	}},
	{"equal jitter", func(p contentionParams) []retry.Option {
		return []retry.Option{retry.WithBackoff(retry.Exponential(2*p.base, 2, p.cap)), retry.WithJitter(retry.EqualJitter)}
	}},
	{"decorrelated jitter", func(p contentionParams) []retry.Option {
		return []retry.Option{retry.WithBackoff(retry.Decorrelated(p.base, p.cap))}
	}},
}

// contentionRun is one run of one strategy.
type contentionRun struct {
	calls int           // writes that reached the row
	done  time.Duration // when the last client learned that it succeeded
}

// contentionResult is scenario a's outcome: runs[i][j] is run j of
// strategies[i].
type contentionResult struct {
	params contentionParams
	runs   [][]contentionRun
}

var errConflict = errors.New("write conflict: the row changed since it was read")

// runContention runs every strategy params.runs times, the simulations
// in parallel; each run's outcome depends on the seed and its index only.
func runContention(p contentionParams) (*contentionResult, error) {
	res := &contentionResult{params: p, runs: make([][]contentionRun, len(strategies))}
	for i := range strategies {
		res.runs[i] = make([]contentionRun, p.runs)
	}
	err := parallel(len(strategies)*p.runs, p.workers, func(k int) error {
		i, run := k/p.runs, k%p.runs
		r, err := contend(p, strategies[i], run)
		res.runs[i][run] = r
		return err
	})
	return res, err
}

// parallel calls f(0) ... f(n-1) on up to workers goroutines (0:
// GOMAXPROCS) and returns their errors joined, in the order of k. Each
// simulation runs on one goroutine at a time, so independent ones run in
// parallel, each as deterministic as alone.
func parallel(n, workers int, f func(k int) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for k := range next {
				errs[k] = f(k)
			}
		})
	}
	for k := range n {
		next <- k
	}
	close(next)
	wg.Wait()
	return errors.Join(slices.DeleteFunc(errs, func(err error) bool { return err == nil })...)
}

// contend is one run of scenario a with strategy st.
func contend(p contentionParams, st strategy, run int) (contentionRun, error) {
	s := newSim()
	clk := s.Clock()
	// The network's delays, one stream per run, shared by the strategies:
	// run j of each strategy starts from the same draws.
	net := rand.New(rand.NewPCG(p.seed, stream(scenarioA, run, 0)))
	delay := func() time.Duration {
		return time.Duration(math.Abs(net.NormFloat64()*2+10) * float64(time.Millisecond))
	}
	var version, calls int
	var out contentionRun
	var firstErr error
	for i := range p.clients {
		opts := append(st.opts(p),
			retry.WithMaxAttempts(math.MaxInt), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithClock(clk),
			retry.WithRandom(rand.NewPCG(p.seed, stream(scenarioA, run, i+1))))
		r, err := retry.New(opts...)
		if err != nil {
			return out, err
		}
		s.Go(func(c *proc) {
			err := r.Do(context.Background(), func(context.Context) error {
				c.Sleep(delay()) // the read's request
				seen := version
				c.Sleep(delay()) // its answer
				c.Sleep(delay()) // the write's request
				calls++
				ok := version == seen
				if ok {
					version++
				}
				c.Sleep(delay()) // its answer
				if !ok {
					return errConflict
				}
				return nil
			})
			if err != nil && firstErr == nil {
				firstErr = err
			}
			out.done = max(out.done, s.Elapsed())
		})
	}
	if err := s.run(); err != nil {
		return out, err
	}
	out.calls = calls
	return out, firstErr
}

// The scenarios' random streams: each proc's and each run's source is
// rand.NewPCG(seed, stream(scenario, run, i)).
const (
	scenarioA = iota + 1
	scenarioB
	scenarioC
	scenarioD
	scenarioE
	scenarioF
	scenarioG
	scenarioH
	scenarioI
)

func stream(scenario, run, i int) uint64 {
	return uint64(scenario)<<56 | uint64(run)<<28 | uint64(i)
}

// meanCalls and meanDone are the means over the runs of strategy i.
func (r *contentionResult) meanCalls(i int) float64 {
	total := 0
	for _, run := range r.runs[i] {
		total += run.calls
	}
	return float64(total) / float64(len(r.runs[i]))
}

func (r *contentionResult) meanDone(i int) time.Duration {
	var total time.Duration
	for _, run := range r.runs[i] {
		total += run.done
	}
	return total / time.Duration(len(r.runs[i]))
}
