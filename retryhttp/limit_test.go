package retryhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retryhttp"
)

// bounded is a server's handler that serves at most capacity requests at
// once, each for hold, and answers 503 at once to every request beyond
// them, as a server with a fixed pool of workers sheds. A request leaves
// its count before its response is written, so the server never counts
// more requests at once than the client has attempts in flight.
type bounded struct {
	capacity int64
	hold     time.Duration
	active   atomic.Int64
	served   atomic.Int64
	shed     atomic.Int64
}

func (b *bounded) handle(_ int, w http.ResponseWriter, _ *http.Request) {
	if b.active.Add(1) > b.capacity {
		b.active.Add(-1)
		b.shed.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	time.Sleep(b.hold)
	b.active.Add(-1)
	b.served.Add(1)
	io.WriteString(w, "ok")
}

// TestLimitConvergesNearTheServersCapacity: 32 callers share one
// overload.Adaptive limit (the defaults: 20 to start, AIMD) through one
// Transport to a loopback server that serves 8 requests at once and
// answers 503 beyond them. The limit comes down from 20 and then stays
// near 8, where the server's capacity is. Measured (1,600 requests, the
// second half's values, one sampled as each request ends; 30 runs, with
// and without -race, up to three at once on 2 cores): the mean 7.2 to
// 8.6, every value in [4, 13], the server shedding 9 % to 23 % of the
// attempts. Without the limit the same callers get a 503 on 86 % of
// their attempts, and most calls fail.
//
// The bands asserted, for capacity K = 8, and why:
//   - the mean of the second half in [0.75K, 1.25K]: AIMD is a sawtooth
//     between the largest limit that sheds nothing (K, or K+1 or K+2
//     while one failure in the window is not more than a tenth) and what
//     one or two backoffs of 0.8 leave of it (about 0.64K), whose mean
//     is 0.8K to K; a loaded machine adds the attempts on their way to
//     the server to those the client counts in flight (Little's law),
//     which lifts the limit a little above the server's own count;
//   - every value of the second half in [K/2 - 1, 2K]: a backoff's
//     window can hold failures of attempts admitted under the larger
//     limit, so three backoffs in a row (K+1 to 7, 5, 4) happen; the
//     bound leaves room for a fourth. Above, the client counts in flight
//     what a loaded machine holds on its way, never twice the server's;
//   - the server shedding less than a third of the second half's
//     attempts: AIMD learns only from failures, and backs off at more
//     than a tenth of a window, so some shedding is how it finds K.
//
// Every first attempt may wait for a permit in the limit's queue, so
// that the callers do not spin on refusals; a retry of a 503 is refused
// while first attempts wait, and the caller gets the 503.
func TestLimitConvergesNearTheServersCapacity(t *testing.T) {
	const (
		capacity = 8
		callers  = 4 * capacity
		requests = 1600
	)
	srv := &bounded{capacity: capacity, hold: 2 * time.Millisecond}
	e := newEnv(t, srv.handle)
	e.base.MaxIdleConnsPerHost = callers
	l, err := overload.NewAdaptive(overload.AdaptiveOptions{MaxQueued: callers, QueueTimeout: 10 * time.Second})
	require.NoError(t, err)
	c := e.client(fast(t, 3, retry.WithOverload(&retry.OverloadOptions{Limit: l, NoBudget: true})), nil)

	var (
		sent                  atomic.Int64
		mu                    sync.Mutex
		limits                []int // as each request ended
		shedHalf, attemptHalf int64 // the server's counts at the half
		wg                    sync.WaitGroup
	)
	for range callers {
		wg.Go(func() {
			for sent.Add(1) <= requests {
				resp, err := c.Do(newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
				switch {
				case errors.Is(err, overload.ErrLimitExceeded): // its queue timed out: not seen, allowed
				case err != nil:
					t.Error(err)
					return
				default:
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
						t.Errorf("status %d", resp.StatusCode)
					}
				}
				mu.Lock()
				if len(limits) == requests/2 {
					shedHalf, attemptHalf = srv.shed.Load(), srv.shed.Load()+srv.served.Load()
				}
				limits = append(limits, l.Stats().Limit)
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	half := limits[len(limits)/2:]
	lo, hi, sum := half[0], half[0], 0
	for _, v := range half {
		lo, hi, sum = min(lo, v), max(hi, v), sum+v
	}
	mean := float64(sum) / float64(len(half))
	shed, attempts := srv.shed.Load()-shedHalf, srv.shed.Load()+srv.served.Load()-attemptHalf
	t.Logf("the limit over the second half: mean %.2f, in [%d, %d]; the server shed %d of %d attempts; %+v", mean, lo, hi, shed, attempts, l.Stats())
	assert.GreaterOrEqual(t, mean, 0.75*capacity, "the limit's mean")
	assert.LessOrEqual(t, mean, 1.25*capacity, "the limit's mean")
	assert.GreaterOrEqual(t, lo, capacity/2-1, "the limit's least value")
	assert.LessOrEqual(t, hi, 2*capacity, "the limit's largest value")
	assert.Less(t, 3*shed, attempts, "the server sheds less than a third of the attempts")
	s := l.Stats()
	assert.Zero(t, s.InFlight, "every permit is given back")
	assert.Zero(t, s.Queued)
}

// kindsLimit is an overload.Adaptive that keeps the kinds of the
// attempts it gave a permit and how they ended.
type kindsLimit struct {
	*overload.Adaptive
	mu      sync.Mutex
	kinds   []overload.Kind
	results []overload.Result
}

func (k *kindsLimit) Acquire(ctx context.Context, a overload.Attempt) error {
	err := k.Adaptive.Acquire(ctx, a)
	if err == nil {
		k.mu.Lock()
		k.kinds = append(k.kinds, a.Kind)
		k.mu.Unlock()
	}
	return err
}

func (k *kindsLimit) Release(r overload.Result, latency time.Duration) {
	k.mu.Lock()
	k.results = append(k.results, r)
	k.mu.Unlock()
	k.Adaptive.Release(r, latency)
}

func (k *kindsLimit) seen() ([]overload.Kind, []overload.Result) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]overload.Kind(nil), k.kinds...), append([]overload.Result(nil), k.results...)
}

func newKindsLimit(t *testing.T, o overload.AdaptiveOptions) *kindsLimit {
	t.Helper()
	a, err := overload.NewAdaptive(o)
	require.NoError(t, err)
	return &kindsLimit{Adaptive: a}
}

// allReleased waits until every permit of l is given back: a losing
// hedge gives its own back on its goroutine, maybe after RoundTrip
// returned.
func allReleased(t *testing.T, l *kindsLimit) {
	t.Helper()
	require.Eventually(t, func() bool { return l.Stats().InFlight == 0 }, 10*time.Second, time.Millisecond,
		"every permit is given back (%d held)", l.Stats().InFlight)
}

// TestLimitHedgesTakePermits: a hedged request's hedge takes a permit of
// the Retrier's limit beside the first attempt's, both held while both
// requests are on the server, and the loser gives its permit back as
// dropped (it says nothing of the server). A limit with no room for the
// hedge sheds it: the first attempt answers alone.
func TestLimitHedgesTakePermits(t *testing.T) {
	t.Run("beside the first attempt", func(t *testing.T) {
		l := newKindsLimit(t, overload.AdaptiveOptions{})
		lost := make(chan struct{}, 1)
		var heldWithTheHedge atomic.Int64
		e := newEnv(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 1 { // held until it lost
				<-r.Context().Done()
				lost <- struct{}{}
				return
			}
			heldWithTheHedge.Store(int64(l.Stats().InFlight))
			io.WriteString(w, "hedge")
		})
		resp, body, err := do(t, e.client(hedging(t, 2, retry.WithOverload(&retry.OverloadOptions{Limit: l})), nil),
			newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, "hedge", body)
		assert.Equal(t, 2, retryhttp.Attempts(resp))
		assert.Equal(t, int64(2), heldWithTheHedge.Load(), "both attempts hold a permit while both are on the server")
		waitFor(t, lost, "the first request's context ended on the server")
		allReleased(t, l)
		kinds, results := l.seen()
		assert.ElementsMatch(t, []overload.Kind{overload.FirstAttempt, overload.HedgeAttempt}, kinds)
		assert.ElementsMatch(t, []overload.Result{overload.Answered, overload.Dropped}, results, "the loser teaches nothing")
	})

	t.Run("shed by a full limit", func(t *testing.T) {
		l := newKindsLimit(t, overload.AdaptiveOptions{Min: 1, Max: 1})
		release := make(chan struct{})
		e := newEnv(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, "first")
		})
		res := async(e.client(hedging(t, 2, retry.WithOverload(&retry.OverloadOptions{Limit: l})), nil),
			newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
		require.Eventually(t, func() bool { return l.Stats().Refused == 1 }, 10*time.Second, time.Millisecond, "the hedge is refused")
		close(release)
		got := <-res
		require.NoError(t, got.err)
		b, err := io.ReadAll(got.resp.Body)
		require.NoError(t, err)
		require.NoError(t, got.resp.Body.Close())
		assert.Equal(t, "first", string(b))
		assert.Equal(t, 1, retryhttp.Attempts(got.resp), "the refused hedge sent nothing")
		allReleased(t, l)
		kinds, results := l.seen()
		assert.Equal(t, []overload.Kind{overload.FirstAttempt}, kinds)
		assert.Equal(t, []overload.Result{overload.Answered}, results)
		assert.Equal(t, uint64(1), l.Stats().Refused, "one hedge refused, none later in the round")
	})
}
