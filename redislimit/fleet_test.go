package redislimit_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/redislimit"
)

// The test binary re-runs itself as a process of a fleet when helperEnv
// is set; TestMain hands it to runHelperProcess. The other variables say
// where its Redis is and what it shares there.
const (
	helperEnv     = "REDISLIMIT_TEST_HELPER"
	helperAddrEnv = "REDISLIMIT_TEST_ADDR"
	helperKeyEnv  = "REDISLIMIT_TEST_KEY"
)

// The fleet: 4 processes share 400 attempts a second (a burst of 0.1s);
// each offers twice its share, from 4 goroutines at a steady pace, and
// counts what it admits in 100ms buckets.
const (
	fleetProcs     = 4
	fleetPerSecond = 400
	fleetBurst     = 40
	fleetOffer     = 2 * fleetPerSecond / fleetProcs
	fleetWorkers   = 4
	fleetBucket    = 100 * time.Millisecond
	fleetTolerance = 0.05 // the bound on the aggregate rate
)

// runHelperProcess runs the role the test binary was started for.
func runHelperProcess(role string) int {
	run, ok := map[string]func() error{
		"fleet": runFleetProcess,
		"pause": runPauseProcess,
	}[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown helper role %q\n", role)
		return 2
	}
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "redislimit %s process: %v\n", role, err)
		return 1
	}
	return 0
}

// fleetResult is what a fleet process reports when its run ends.
type fleetResult struct {
	Admitted  []int64  // attempts admitted, per bucket from the start
	Fallbacks []uint64 // Stats().Fallbacks at each bucket's end
	Others    []string // errors other than refusals: there must be none
	Stats     redislimit.Stats
}

// runFleetProcess admits attempts through a Rate shared by the fleet: it
// prints "ready" once connected, then waits for "go <start, Unix ns>
// <duration>" and offers fleetOffer attempts a second from the start for
// the duration; then it prints its fleetResult as JSON.
func runFleetProcess() error {
	// go-redis logs each failed dial while Redis is killed; Stats counts
	// them. The logger is the process's, and this process is the test's.
	redis.SetLogger(quiet{})
	c := redis.NewClient(&redis.Options{Addr: os.Getenv(helperAddrEnv), ContextTimeoutEnabled: true})
	defer c.Close()
	r, err := redislimit.NewRate(c, &redislimit.RateOptions{
		Key: os.Getenv(helperKeyEnv), PerSecond: fleetPerSecond, Burst: fleetBurst, FleetSize: fleetProcs,
		// On a test machine of 2 cores running 8 such processes under
		// -race and 2 Redis servers, a script can take 45ms in Redis
		// (SLOWLOG); past the default 50ms a round trip falls back, so
		// the fleet would test the machine's load. A killed Redis
		// refuses connections at once, whatever the Timeout.
		Timeout: time.Second,
	})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		return err
	}
	fmt.Println("ready")
	var startNs int64
	var d time.Duration
	if _, err := fmt.Scanf("go %d %d\n", &startNs, &d); err != nil {
		return fmt.Errorf("reading the go line: %w", err)
	}
	start := time.Unix(0, startNs)
	end := start.Add(d)
	buckets := int((d + fleetBucket - 1) / fleetBucket)
	admitted := make([]atomic.Int64, buckets)
	res := fleetResult{Admitted: make([]int64, buckets), Fallbacks: make([]uint64, buckets)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	period := fleetWorkers * time.Second / fleetOffer
	for w := range fleetWorkers {
		wg.Go(func() {
			time.Sleep(time.Until(start.Add(period * time.Duration(w) / fleetWorkers)))
			tick := time.NewTicker(period)
			defer tick.Stop()
			for now := time.Now(); now.Before(end); now = <-tick.C {
				err := r.Admit(ctx, first)
				switch {
				case err == nil:
					if i := int(now.Sub(start) / fleetBucket); i >= 0 && i < buckets {
						admitted[i].Add(1)
					}
				case !errors.Is(err, overload.ErrRateLimited):
					mu.Lock()
					res.Others = append(res.Others, err.Error())
					mu.Unlock()
				}
			}
		})
	}
	wg.Go(func() { // the Fallbacks at each bucket's end
		for i := range buckets {
			time.Sleep(time.Until(start.Add(time.Duration(i+1) * fleetBucket)))
			res.Fallbacks[i] = r.Stats().Fallbacks
		}
	})
	wg.Wait()
	for i := range admitted {
		res.Admitted[i] = admitted[i].Load()
	}
	res.Stats = r.Stats()
	return json.NewEncoder(os.Stdout).Encode(res)
}

// quiet is a go-redis logger that logs nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// helper is a running process of the test binary in a helper role.
type helper struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File
	out    *bufio.Scanner
	done   chan error
}

// startHelpers starts n processes of the test binary in role, each with
// env, and returns once each has printed "ready". They are stopped when
// the test ends: their input closed, then killed if not gone 10s on.
func startHelpers(t *testing.T, role string, n int, env ...string) []*helper {
	t.Helper()
	hs := make([]*helper, n)
	// All at once: a process built with -race sleeps 1s as it exits.
	t.Cleanup(func() {
		for _, h := range hs {
			if h != nil {
				_ = h.stdin.Close()
			}
		}
		timeout := time.After(10 * time.Second)
		for i, h := range hs {
			if h == nil {
				continue
			}
			select {
			case err := <-h.done:
				assert.NoError(t, err, "%s process %d", role, i)
			case <-timeout:
				_ = h.cmd.Process.Kill()
				<-h.done
				t.Errorf("%s process %d did not exit within 10s of its input closing", role, i)
			}
			_ = h.stdout.Close()
		}
	})
	for i := range hs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), env...), helperEnv+"="+role)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		// A pipe of our own rather than StdoutPipe, so that Wait may run
		// while the test still reads.
		out, w, err := os.Pipe()
		require.NoError(t, err)
		cmd.Stdout = w
		err = cmd.Start()
		_ = w.Close()
		if err != nil {
			_ = out.Close()
		}
		require.NoError(t, err)
		h := &helper{cmd: cmd, stdin: stdin, stdout: out, out: bufio.NewScanner(out), done: make(chan error, 1)}
		h.out.Buffer(nil, 1<<20)
		hs[i] = h
		go func() { h.done <- cmd.Wait() }()
	}
	for i, h := range hs {
		require.Equal(t, "ready", h.line(t, 30*time.Second), "%s process %d", role, i)
	}
	return hs
}

// line reads the helper's next line of output, failing the test if none
// comes within d.
func (h *helper) line(t *testing.T, d time.Duration) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		if h.out.Scan() {
			got <- h.out.Text()
		} else {
			got <- fmt.Sprintf("(output ended: %v)", h.out.Err())
		}
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(d):
		t.Fatalf("process %d said nothing within %v", h.cmd.Process.Pid, d)
		return ""
	}
}

// send writes a line to the helper's input.
func (h *helper) send(t *testing.T, format string, args ...any) {
	t.Helper()
	_, err := fmt.Fprintf(h.stdin, format+"\n", args...)
	require.NoError(t, err)
}

// runFleet starts the fleet's run in 300ms, for d, and returns its start
// and every process's result once the run ends. during, if set, runs
// meanwhile, given the start.
func runFleet(t *testing.T, procs []*helper, d time.Duration, during func(start time.Time)) (time.Time, []fleetResult) {
	t.Helper()
	start := time.Now().Add(300 * time.Millisecond)
	for _, p := range procs {
		p.send(t, "go %d %d", start.UnixNano(), int64(d))
	}
	if during != nil {
		during(start)
	}
	results := make([]fleetResult, len(procs))
	for i, p := range procs {
		line := p.line(t, time.Until(start.Add(d))+30*time.Second)
		require.NoError(t, json.Unmarshal([]byte(line), &results[i]), "process %d said %q", i, line)
		assert.Empty(t, results[i].Others, "process %d: errors that are no refusal", i)
	}
	return start, results
}

// admittedIn is how many attempts the fleet admitted from from to to
// after the start, bucket-aligned.
func admittedIn(results []fleetResult, from, to time.Duration) int64 {
	var n int64
	for _, r := range results {
		for i := int(from / fleetBucket); i < int(to/fleetBucket) && i < len(r.Admitted); i++ {
			n += r.Admitted[i]
		}
	}
	return n
}

// fallbacksIn is how many attempts process r decided without Redis from
// from to to after the start, bucket-aligned.
func fallbacksIn(r fleetResult, from, to time.Duration) uint64 {
	before := uint64(0)
	if i := int(from/fleetBucket) - 1; i >= 0 {
		before = r.Fallbacks[i]
	}
	return r.Fallbacks[int(to/fleetBucket)-1] - before
}

// assertRate checks that the fleet admitted fleetPerSecond a second,
// within fleetTolerance, from from to to after the start.
func assertRate(t *testing.T, results []fleetResult, from, to time.Duration, what string) {
	t.Helper()
	n := admittedIn(results, from, to)
	rate := float64(n) / (to - from).Seconds()
	t.Logf("%s, %v to %v: %d admitted, %.1f/s (limit %d/s, %+.2f%%)", what, from, to, n, rate, fleetPerSecond, 100*(rate/fleetPerSecond-1))
	assert.InDelta(t, fleetPerSecond, rate, fleetTolerance*fleetPerSecond, "%s: the fleet's rate", what)
}

// skipShort skips a test that runs for many seconds under -short, unless
// CI=true: it is the evidence that the limit holds across processes.
func skipShort(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("runs a fleet of processes for many seconds: not under -short")
	}
}

// TestFleet_fourProcesses: 4 processes share a limit of 400/s through
// Redis for 30s, each offering twice its share; the fleet's aggregate
// rate is within 5 % of the limit, each process gets some of it, and
// none falls back.
func TestFleet_fourProcesses(t *testing.T) {
	skipShort(t)
	t.Parallel()
	addr := needRedis(t)
	key := testKey(t, clientAt(t, addr))
	procs := startHelpers(t, "fleet", fleetProcs, helperAddrEnv+"="+addr, helperKeyEnv+"="+key)
	const d = 30 * time.Second
	_, results := runFleet(t, procs, d, nil)

	assertRate(t, results, 0, d, "Redis up throughout")
	for i, r := range results {
		n := admittedIn(results[i:i+1], 0, d)
		t.Logf("process %d: %d admitted, %+v", i, n, r.Stats)
		assert.Positive(t, n, "process %d admitted nothing", i)
		assert.Zero(t, r.Stats.Fallbacks, "process %d fell back", i)
	}
	lo, hi := perSecondRange(results, d)
	t.Logf("the fleet's rate second by second: %d to %d", lo, hi)
}

// perSecondRange is the least and the most the fleet admitted in any
// whole second of the run but the first (the burst).
func perSecondRange(results []fleetResult, d time.Duration) (lo, hi int64) {
	lo = math.MaxInt64
	for s := time.Second; s+time.Second <= d; s += time.Second {
		n := admittedIn(results, s, s+time.Second)
		lo, hi = min(lo, n), max(hi, n)
	}
	return lo, hi
}

// TestFleet_redisKilled: a fleet of 4 runs on a Redis of its own, killed
// (SIGKILL) 4s in and started again on the same port 4s later. While it
// is down every process goes on under its Fallback (400/4 a second
// each), counted as fallbacks; from 3s after the restart, the fleet is
// back on Redis and its rate within 5 % of the limit.
func TestFleet_redisKilled(t *testing.T) {
	skipShort(t)
	t.Parallel()
	srv := startRedisServer(t)
	procs := startHelpers(t, "fleet", fleetProcs, helperAddrEnv+"="+srv.addr, helperKeyEnv+"=killed")
	const kill, restart, d = 4 * time.Second, 8 * time.Second, 17 * time.Second
	_, results := runFleet(t, procs, d, func(start time.Time) {
		time.Sleep(time.Until(start.Add(kill)))
		srv.kill(t)
		time.Sleep(time.Until(start.Add(restart)))
		srv.start(t)
		t.Logf("Redis back %v after the start", time.Until(start).Abs().Round(time.Millisecond))
	})

	for i, r := range results {
		t.Logf("process %d: %+v", i, r.Stats)
		assert.Zero(t, fallbacksIn(r, 0, kill-fleetBucket), "process %d fell back before Redis was killed", i)
		assert.Positive(t, fallbacksIn(r, kill, restart), "process %d: no fallback while Redis was down", i)
		assert.Positive(t, admittedIn(results[i:i+1], kill+time.Second, restart), "process %d stopped while Redis was down", i)
		assert.Zero(t, fallbacksIn(r, restart+3*time.Second, d), "process %d still fell back 3s after Redis came back", i)
		assert.Positive(t, r.Stats.Errors, "process %d saw no Redis error", i)
	}
	assertRate(t, results, time.Second, kill, "Redis up")
	assertRate(t, results, kill+time.Second, restart, "Redis down, each process on its share")
	assertRate(t, results, restart+3*time.Second, d, "Redis back")
}

// redisServer is a redis-server of the test's own, with nothing on disk.
type redisServer struct {
	bin, addr, port string
	cmd             *exec.Cmd
}

// startRedisServer starts a redis-server on a free port, killed when the
// test ends. Without the binary the test skips, unless CI=true.
func startRedisServer(t *testing.T) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := fmt.Sprintf("no redis-server on PATH (%v): install it (apt-get install redis-server) to run this test", err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, port, _ := net.SplitHostPort(addr)
	s := &redisServer{bin: bin, addr: addr, port: port}
	s.start(t)
	t.Cleanup(func() { s.kill(t) })
	return s
}

// start starts the server and waits until it answers.
func (s *redisServer) start(t *testing.T) {
	t.Helper()
	s.cmd = exec.Command(s.bin, "--port", s.port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	require.NoError(t, s.cmd.Start())
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer c.Close()
	eventually(t, 10*time.Second, "redis-server to answer on "+s.addr, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		return c.Ping(ctx).Err() == nil
	})
}

// kill kills the server with SIGKILL, if it runs.
func (s *redisServer) kill(t *testing.T) {
	if s.cmd == nil {
		return
	}
	require.NoError(t, s.cmd.Process.Kill())
	_ = s.cmd.Wait()
	s.cmd = nil
}

// runPauseProcess shares a partitioned Pause through a PauseShare on the
// channel helperKeyEnv names. It prints "ready" once subscribed, then
// answers a command per input line:
//
//	extend P MS  pauses partition P for MS ms: "until <Unix ms>"
//	wait P MS    waits up to MS ms for P to be paused: "paused <Unix ms> <waited ms>" or "none"
//	stats        the PauseShare's stats, as JSON
//
// and closes the PauseShare when its input ends.
func runPauseProcess() error {
	c := redis.NewClient(&redis.Options{Addr: os.Getenv(helperAddrEnv), ContextTimeoutEnabled: true})
	defer c.Close()
	share, err := redislimit.NewPauseShare(c, &redislimit.PauseShareOptions{Channel: os.Getenv(helperKeyEnv)})
	if err != nil {
		return err
	}
	defer share.Close()
	p, err := overload.NewPause(overload.PauseOptions{Partitioned: true, OnPause: share.Publish})
	if err != nil {
		return err
	}
	if err := share.Start(p); err != nil {
		return err
	}
	select {
	case <-share.Ready():
	case <-time.After(10 * time.Second):
		return errors.New("not subscribed within 10s")
	}
	fmt.Println("ready")
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		ms := 0
		if len(f) == 3 {
			ms, err = strconv.Atoi(f[2])
			if err != nil {
				return err
			}
		}
		switch {
		case len(f) == 3 && f[0] == "extend":
			ctx := overload.WithPartition(context.Background(), f[1])
			p.Extend(ctx, time.Duration(ms)*time.Millisecond)
			fmt.Println("until", p.Until(ctx).UnixMilli())
		case len(f) == 3 && f[0] == "wait":
			ctx := overload.WithPartition(context.Background(), f[1])
			start := time.Now()
			for p.Until(ctx).IsZero() && time.Since(start) < time.Duration(ms)*time.Millisecond {
				time.Sleep(time.Millisecond)
			}
			if until := p.Until(ctx); until.IsZero() {
				fmt.Println("none")
			} else {
				fmt.Println("paused", until.UnixMilli(), time.Since(start).Milliseconds())
			}
		case len(f) == 1 && f[0] == "stats":
			if err := json.NewEncoder(os.Stdout).Encode(share.Stats()); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unknown command %q", lines.Text())
		}
	}
	return lines.Err()
}

// TestFleet_sharedPause: of 4 processes that share a downstream's pause
// through Redis, one learns that a partition is paused; within 1s each
// other one holds that partition's calls until the same end, and not
// another partition's; a fifth process started later holds them too.
func TestFleet_sharedPause(t *testing.T) {
	t.Parallel()
	addr := needRedis(t)
	channel := testKey(t, clientAt(t, addr))
	env := []string{helperAddrEnv + "=" + addr, helperKeyEnv + "=" + channel}
	procs := startHelpers(t, "pause", fleetProcs, env...)

	procs[0].send(t, "extend tenant-a 5000")
	var until int64
	_, err := fmt.Sscanf(procs[0].line(t, 5*time.Second), "until %d", &until)
	require.NoError(t, err)
	for _, p := range procs[1:] {
		p.send(t, "wait tenant-a 1000")
	}
	for i, p := range procs[1:] {
		var got, waited int64
		line := p.line(t, 5*time.Second)
		_, err := fmt.Sscanf(line, "paused %d %d", &got, &waited)
		require.NoError(t, err, "process %d said %q", i+1, line)
		assert.Equal(t, until, got, "process %d: the pause's end", i+1)
		t.Logf("process %d: paused after %dms", i+1, waited)
	}
	for i, p := range procs[1:] {
		p.send(t, "wait tenant-b 0")
		assert.Equal(t, "none", p.line(t, 5*time.Second), "process %d: tenant-b is not paused", i+1)
	}

	late := startHelpers(t, "pause", 1, env...)[0]
	late.send(t, "wait tenant-a 0")
	assert.Equal(t, fmt.Sprintf("paused %d 0", until), late.line(t, 5*time.Second), "a process started later")

	// The others may hear of the pause before its publisher counts it.
	var stats redislimit.PauseStats
	eventually(t, time.Second, "the pause counted as published", func() bool {
		procs[0].send(t, "stats")
		require.NoError(t, json.Unmarshal([]byte(procs[0].line(t, 5*time.Second)), &stats))
		return stats.Published == 1
	})
	assert.Equal(t, redislimit.PauseStats{Published: 1}, stats, "the process that learned the pause ignored its own message")
}
