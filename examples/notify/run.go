package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retryhttp"
	"github.com/steadfast-go/retry/retryslog"
	"github.com/steadfast-go/retry/retrystats"
	"github.com/steadfast-go/retry/retrytest"
)

// env is what a run writes to, and what tests replace.
type env struct {
	stdout   io.Writer
	log      io.Writer            // the slog output; nil: open config.logPath
	terminal bool                 // stdout is a terminal: draw the progress bar
	registry *prometheus.Registry // metrics; nil: only with -metrics
}

// runner holds one run's shared state.
type runner struct {
	cfg     config
	env     env
	shared  *retry.Retrier
	base    http.RoundTripper
	url     string
	stats   *retrystats.Stats
	limit   *overload.Adaptive // -limit's; nil without it
	pause   *overload.Pause    // -pause's; nil without it
	limited limited            // 429s the jobs received
	svc     *service
	redeliv map[int]bool
	tl      *timeline // the run's virtual time

	// The queue, fed by take: the generated jobs in order, and each
	// redelivery once its visibility timeout has run out.
	qmu     sync.Mutex
	jobs    []*job
	next    int        // the next generated job to queue
	queue   []delivery // at most cfg.queue
	pending []redelivery

	mu      sync.Mutex
	results []result
	done    atomic.Int64 // deliveries finished

	// -crash-at stops the process between jobs: once the sends reach
	// it, workers take no new job, and the last to leave exits.
	active   int // workers on the timeline
	sends    int64
	crashing bool
}

// visibilityTimeout is how long after a delivery whose acknowledgement
// was lost the queue delivers the job again, as SQS does after a
// message's visibility timeout: longer than the idempotency lease (30s),
// so that with -at-least-once the redelivery of a job whose outcome is
// unknown finds the lease run out.
const visibilityTimeout = time.Minute

// redelivery is a delivery the queue makes again at a time.
type redelivery struct {
	d  delivery
	at time.Time
}

// delivery is one delivery of a job by the queue: n is 1, or 2 for a
// redelivery.
type delivery struct {
	job *job
	n   int
}

// result is how one delivery ended, as the Retrier reported it.
type result struct {
	delivery  int
	done      retry.Done
	replayed  bool // the idempotency store answered: the service was not called
	status    int  // the final response's status; 0 when there was none
	elapsed   time.Duration
	unhandled error // an error that is no outcome of the policy (a bug or a broken setup)
}

// run sends the jobs and prints the summary.
func run(ctx context.Context, cfg config, e env) (summary, error) {
	if cfg.river != "" {
		return runRiver(ctx, cfg, e)
	}
	started := time.Now()
	b, err := openBackends(ctx, cfg, true)
	if err != nil {
		return summary{}, err
	}
	defer b.close()
	epoch, err := b.epoch(ctx, started)
	if err != nil {
		return summary{}, err
	}

	logOut := e.log
	if logOut == nil {
		f, err := openLog(cfg.logPath)
		if err != nil {
			return summary{}, err
		}
		defer f.Close()
		logOut = f
	}
	logger := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: cfg.logLevel}))

	stats := new(retrystats.Stats)
	observers := []retry.Observer{stats, retryslog.New(logger, &retryslog.Options{RetryLevel: slog.LevelDebug})}
	r := &runner{cfg: cfg, env: e, stats: stats, tl: newTimeline(epoch, b.storeClock)}

	metricsURL := ""
	if cfg.metrics != "" || e.registry != nil {
		reg := e.registry
		if reg == nil {
			reg = prometheus.NewRegistry()
		}
		obs, err := newMetrics(reg, r.queueLen)
		if err != nil {
			return summary{}, err
		}
		observers = append(observers, obs)
		if cfg.metrics != "" {
			url, stop, err := serveMetrics(cfg.metrics, reg)
			if err != nil {
				return summary{}, err
			}
			defer stop()
			metricsURL = url
		}
	}

	d := deps{store: b.store, sink: b.sink, observers: observers, noBudget: r.cfg.noBudget, atLeastOnce: r.cfg.atLeastOnce}
	if cfg.limit {
		// No queue: an attempt that waited for a permit would hold the
		// timeline, which no other job could then move. The service fails
		// -fail-rate of attempts at random whatever its load: only a
		// window with a fifth more than that says overload (at the
		// default tenth, the limit takes its usual failures for overload
		// and falls to 3, refusing 2,050 of 2,108 deliveries).
		o := overload.AdaptiveOptions{FailedShare: min(cfg.failRate+0.2, 0.95)}
		if r.limit, err = overload.NewAdaptive(o); err != nil {
			return summary{}, err
		}
		d.limit = r.limit
	}
	if cfg.pause {
		// On the timeline's time, as the jobs' clocks are.
		o := overload.PauseOptions{Spread: pauseSpread, Clock: &timelineClock{Clock: retrytest.NewClock(), tl: r.tl}}
		if r.pause, err = overload.NewPause(o); err != nil {
			return summary{}, err
		}
		d.pause = r.pause
	}
	if r.shared, err = newRetrier(d); err != nil {
		return summary{}, err
	}
	if r.svc, err = newService(cfg.seed, cfg.failRate, cfg.serviceDedup, cfg.deliveries); err != nil {
		return summary{}, err
	}
	r.svc.rate = newVirtualRate(cfg.serviceRate)
	url, stopService, err := r.svc.start()
	if err != nil {
		return summary{}, err
	}
	defer stopService()
	r.url = url + "/v1/push"
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = cfg.workers
	defer base.CloseIdleConnections()
	r.base = base

	jobs := generateJobs(cfg.seed, cfg.jobs, cfg.permanentRate)
	r.jobs = jobs
	r.redeliv = redelivered(cfg.seed, jobs, cfg.redeliverRate)
	total := len(jobs) + len(r.redeliv)

	fmt.Fprintf(e.stdout, "notify: %d jobs, %d workers, queue of %d, seed %d; transient failures %.0f%% of attempts, permanent %.0f%% of jobs, redelivered %.0f%%\n",
		cfg.jobs, cfg.workers, cfg.queue, cfg.seed, 100*cfg.failRate, 100*cfg.permanentRate, 100*cfg.redeliverRate)
	dedup := "delivers at most once per Idempotency-Key"
	if !cfg.serviceDedup {
		dedup = "no deduplication: delivers every request it accepts"
	}
	fmt.Fprintf(e.stdout, "  push service   %s (simulated, on loopback; retryhttp sends every attempt; %s)\n", url, dedup)
	if cfg.serviceRate > 0 {
		fmt.Fprintf(e.stdout, "  its rate       %d requests a second; over it, 429 with Retry-After in whole seconds\n", cfg.serviceRate)
	}
	if r.pause != nil {
		fmt.Fprintf(e.stdout, "  pause          overload.Pause shared by every job: a 429's Retry-After holds every job's next attempt until then\n")
	}
	fmt.Fprintf(e.stdout, "  time           virtual: the jobs run one at a time on one timeline, so waits, latencies and timeouts take no real time\n")
	once := "at most once: an unknown outcome is stored and replayed"
	if cfg.atLeastOnce {
		once = "at least once: a job whose outcome is unknown is sent again after its lease"
	}
	fmt.Fprintf(e.stdout, "  idempotency    %s; %s\n", b.storeName, once)
	if r.limit != nil {
		fmt.Fprintf(e.stdout, "  limit          overload.Adaptive shared by every job: %d attempts in flight to start, AIMD on how they end\n", r.limit.Stats().Limit)
	}
	fmt.Fprintf(e.stdout, "  dead letters   %s\n", b.sinkName)
	if cfg.logPath == "-" {
		fmt.Fprintf(e.stdout, "  log            standard error (slog JSON, level %v)\n", cfg.logLevel)
	} else if e.log == nil {
		fmt.Fprintf(e.stdout, "  log            %s (slog JSON, level %v)\n", cfg.logPath, cfg.logLevel)
	}
	if metricsURL != "" {
		fmt.Fprintf(e.stdout, "  metrics        %s\n", metricsURL)
	}

	p := startProgress(e, total, r)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	r.active = cfg.workers
	for range cfg.workers {
		wg.Add(1)
		wake := r.tl.join()
		go func() {
			defer wg.Done()
			<-wake
			r.work(ctx)
		}()
	}
	r.tl.start()
	wg.Wait()
	p.stop()
	if err := ctx.Err(); err != nil {
		return summary{}, fmt.Errorf("stopped: %w", err)
	}

	s := r.summarize(jobs)
	fmt.Fprintln(e.stdout)
	fmt.Fprint(e.stdout, s.table())
	for _, err := range s.unhandled {
		fmt.Fprintln(e.stdout, "  unexpected error:", err)
	}
	printCommands(e.stdout, cfg, b, epoch, s)
	fmt.Fprintf(e.stdout, "\nran in %v of real time\n", time.Since(started).Round(time.Millisecond))
	return s, nil
}

// queueLen returns how many deliveries wait in the queue.
func (r *runner) queueLen() int {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	return len(r.queue)
}

// take returns the next delivery from the queue, or false when there is
// none left (or the run is stopping). A worker that finds the queue empty
// with redeliveries to come sleeps until the first is due. Call it on the
// timeline.
func (r *runner) take(ctx context.Context) (delivery, bool) {
	for {
		if ctx.Err() != nil {
			return delivery{}, false
		}
		r.qmu.Lock()
		if r.crashing {
			r.qmu.Unlock()
			return delivery{}, false
		}
		r.refill()
		if len(r.queue) > 0 {
			d := r.queue[0]
			r.queue = r.queue[1:]
			r.refill()
			r.qmu.Unlock()
			return d, true
		}
		if len(r.pending) == 0 {
			r.qmu.Unlock()
			return delivery{}, false
		}
		at := r.pending[0].at
		r.qmu.Unlock()
		r.tl.sleepUntil(at)
	}
}

// refill fills the queue up to its capacity: redeliveries that are due
// first, then the generated jobs in order. r.qmu must be held.
func (r *runner) refill() {
	now := r.tl.Now()
	for len(r.queue) < r.cfg.queue {
		switch {
		case len(r.pending) > 0 && !r.pending[0].at.After(now):
			r.queue = append(r.queue, r.pending[0].d)
			r.pending = r.pending[1:]
		case r.next < len(r.jobs):
			r.queue = append(r.queue, delivery{job: r.jobs[r.next], n: 1})
			r.next++
		default:
			return
		}
	}
}

// work takes deliveries from the queue until there are none left, on the
// timeline.
func (r *runner) work(ctx context.Context) {
	defer r.leave()
	for {
		d, ok := r.take(ctx)
		if !ok {
			return
		}
		res := r.send(ctx, d)
		r.mu.Lock()
		r.results = append(r.results, res)
		r.mu.Unlock()
		r.done.Add(1)
		r.qmu.Lock()
		if d.n == 1 && r.redeliv[d.job.index] {
			// The acknowledgement was lost: the queue delivers the job
			// again once its visibility timeout has run out. Deliveries
			// end in the timeline's order, so pending stays sorted.
			r.pending = append(r.pending, redelivery{d: delivery{job: d.job, n: 2}, at: r.tl.Now().Add(visibilityTimeout)})
		}
		if res.unhandled == nil && res.done.Attempts > 0 && res.done.Outcome == retry.OutcomeSuccess {
			if r.sends++; r.cfg.crashAt > 0 && r.sends == int64(r.cfg.crashAt) {
				r.crashing = true
			}
		}
		r.qmu.Unlock()
	}
}

// leave takes a worker off the timeline. With -crash-at, the last worker
// to leave ends the process: the jobs in flight have ended (so that none
// is left between its send and the store's record of it), and it exits
// without any cleanup.
func (r *runner) leave() {
	r.qmu.Lock()
	r.active--
	if r.crashing && r.active == 0 {
		fmt.Fprintf(r.env.stdout, "\ncrash-at %d: %d sends made (the jobs in flight ended first, so that none is left between its send and the store's record of it);\n"+
			"exiting abruptly with os.Exit(3): the queue, the counters and the unsent jobs are lost. Run again with the same flags, without -crash-at.\n", r.cfg.crashAt, r.sends)
		os.Exit(3)
	}
	r.qmu.Unlock()
	r.tl.leave()
}

// lastDone keeps the Done event of one call.
type lastDone struct{ d retry.Done }

func (*lastDone) OnAttemptStart(context.Context, retry.AttemptStart) {}
func (*lastDone) OnAttemptEnd(context.Context, retry.AttemptEnd)     {}
func (*lastDone) OnRetry(context.Context, retry.Scheduled)           {}
func (*lastDone) OnWaitEnd(context.Context, retry.WaitEnd)           {}
func (l *lastDone) OnDone(_ context.Context, e retry.Done)           { l.d = e }

// send makes one delivery of a job: one call of the shared policy,
// through retryhttp, on the job's own mock clock (at the timeline's time)
// and random source.
//
// In a service of your own, build one Transport from the shared Retrier
// and send every request through it. Only the determinism of this
// example needs a Transport per job: WithClock and WithRandom are set per
// Retrier.
func (r *runner) send(ctx context.Context, d delivery) result {
	res := result{delivery: d.n}
	clk := newJobClock(r.tl, r.pause)
	defer clk.Stop()
	obs := &lastDone{}
	jr, err := r.shared.With(
		retry.WithClock(clk),
		retry.WithRandom(rand.NewPCG(r.cfg.seed, uint64(d.job.index)<<1|uint64(d.n-1))),
		retry.WithPayload(d.job.body),
		retry.WithObserver(obs),
	)
	if err != nil {
		res.unhandled = err
		return res
	}
	tr, err := retryhttp.NewTransport(jr, &retryhttp.Options{
		Base:              &virtualNetwork{clk: clk, base: r.base, timeout: attemptTimeout, limited: &r.limited},
		PermanentStatuses: permanentStatuses,
		OperationName:     func(*http.Request) string { return d.job.Type },
	})
	if err != nil {
		res.unhandled = err
		return res
	}
	ctx = retry.ContextWithIdempotencyKey(ctx, "notify:"+d.job.ID)
	ctx, cancel := clk.WithTimeout(ctx, r.cfg.deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(d.job.body))
	if err != nil {
		res.unhandled = err
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	// The service deduplicates by this header (-service-dedup): the job
	// ID, the same on every attempt and every delivery of the job.
	req.Header.Set(retryhttp.IdempotencyKeyHeader, d.job.ID)

	start := clk.Now()
	resp, err := tr.RoundTrip(req)
	res.elapsed = clk.Now().Sub(start)
	res.done = obs.d
	var se *retryhttp.StatusError
	switch {
	case resp != nil:
		res.status = resp.StatusCode
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	case errors.As(err, &se):
		// The call ended on a status without returning the response:
		// its context ended, or its dead letter was not recorded.
		res.status = se.StatusCode
	}
	switch {
	case err == nil:
	case errors.Is(err, retry.ErrReplayed):
		res.replayed = true
	case asRetryError(err) == nil:
		res.unhandled = err
	}
	return res
}

func asRetryError(err error) *retry.Error {
	var re *retry.Error
	if errors.As(err, &re) {
		return re
	}
	return nil
}
