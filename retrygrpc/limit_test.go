package retrygrpc_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrygrpc"
	"github.com/steadfast-go/retry/retrytest"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// bounded is a TestService that serves at most capacity UnaryCalls at
// once, each for hold, and answers code at once to every call beyond
// them, as a server with a fixed pool of workers sheds. A call leaves its
// count before it returns, so the server never counts more calls at once
// than the client has attempts in flight.
type bounded struct {
	testpb.UnimplementedTestServiceServer
	capacity int64
	hold     time.Duration
	code     codes.Code
	active   atomic.Int64
	served   atomic.Int64
	shed     atomic.Int64
}

func (b *bounded) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if b.active.Add(1) > b.capacity {
		b.active.Add(-1)
		b.shed.Add(1)
		return nil, status.Error(b.code, "over capacity")
	}
	time.Sleep(b.hold)
	b.active.Add(-1)
	b.served.Add(1)
	return &testpb.SimpleResponse{}, nil
}

// TestLimitConvergesNearTheServersCapacity: 32 callers share one
// overload.Adaptive limit (the defaults: 20 to start, AIMD) through the
// unary interceptor, over TCP on loopback, to a gRPC server that serves
// 8 calls at once and answers UNAVAILABLE (or RESOURCE_EXHAUSTED) beyond
// them. The limit comes down from 20 and then stays near 8. Measured
// (1,600 calls, the second half's values, one sampled as each call ends;
// 20 runs, with and without -race, up to three at once on 2 cores): the
// mean 7.3 to 8.7, every value in [4, 12], the server shedding 9 % to
// 21 % of the attempts.
//
// The bands asserted are retryhttp's, for the same reasons (see its
// TestLimitConvergesNearTheServersCapacity), for capacity K = 8: the
// second half's mean in [0.75K, 1.25K], its every value in [K/2 - 1,
// 2K], and the server shedding less than a third of its attempts.
//
// The limit hears of overload only in the failures the method's Policy
// retries: RESOURCE_EXHAUSTED, which it does not retry by default, is a
// permanent answer, which tells the limit the server coped (see
// TestLimitHearsWhatThePolicyRetries). Against a server that sheds with
// it, list it in RetryableCodes: so does the second case. Left out, the
// limit climbs past 50 (in flight is at least half of it: all 32 callers)
// and the server sheds 64 % to 85 % of the attempts.
func TestLimitConvergesNearTheServersCapacity(t *testing.T) {
	for _, tc := range []struct {
		name string
		code codes.Code
		opts *retrygrpc.Options
	}{
		{"UNAVAILABLE", codes.Unavailable, nil},
		{"RESOURCE_EXHAUSTED retried by the Policy", codes.ResourceExhausted, &retrygrpc.Options{Methods: map[string]retrygrpc.Policy{
			"": {RetryableCodes: []codes.Code{codes.Unavailable, codes.ResourceExhausted}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const (
				capacity = 8
				callers  = 4 * capacity
				calls    = 1600
			)
			srv := &bounded{capacity: capacity, hold: 2 * time.Millisecond, code: tc.code}
			l, err := overload.NewAdaptive(overload.AdaptiveOptions{MaxQueued: callers, QueueTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			u, _ := interceptors(t, noWaits(t, 3, retry.WithOverload(&retry.OverloadOptions{Limit: l})), tc.opts)
			client, _ := start(t, srv, u, nil)

			var (
				sent                  atomic.Int64
				mu                    sync.Mutex
				limits                []int // as each call ended
				shedHalf, attemptHalf int64 // the server's counts at the half
				wg                    sync.WaitGroup
			)
			for range callers {
				wg.Go(func() {
					for sent.Add(1) <= calls {
						_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
						// A refusal of the queue (not seen) or the server's shedding.
						if err != nil && !errors.Is(err, overload.ErrLimitExceeded) && status.Code(err) != tc.code {
							t.Error(err)
							return
						}
						mu.Lock()
						if len(limits) == calls/2 {
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
			if mean < 0.75*capacity || mean > 1.25*capacity {
				t.Errorf("the limit's mean is %.2f, want it in [%v, %v]", mean, 0.75*capacity, 1.25*capacity)
			}
			if lo < capacity/2-1 || hi > 2*capacity {
				t.Errorf("the limit went from %d to %d, want it in [%d, %d]", lo, hi, capacity/2-1, 2*capacity)
			}
			if 3*shed >= attempts {
				t.Errorf("the server shed %d of %d attempts, want less than a third", shed, attempts)
			}
			if s := l.Stats(); s.InFlight != 0 || s.Queued != 0 {
				t.Errorf("%+v: want every permit given back", s)
			}
		})
	}
}

// kindsLimit is an overload.Adaptive that keeps the kinds of the
// attempts it gave a permit and how they ended.
type kindsLimit struct {
	*overload.Adaptive
	mu      sync.Mutex
	kinds   []overload.Kind
	results []overload.Result
}

func newKindsLimit(t *testing.T, o overload.AdaptiveOptions) *kindsLimit {
	t.Helper()
	a, err := overload.NewAdaptive(o)
	if err != nil {
		t.Fatal(err)
	}
	return &kindsLimit{Adaptive: a}
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

// seen returns the kinds and the results, each sorted: hedges end in no
// set order.
func (k *kindsLimit) seen() ([]overload.Kind, []overload.Result) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Sorted(slices.Values(k.kinds)), slices.Sorted(slices.Values(k.results))
}

// released waits until every permit of l is given back: a losing hedge
// gives its own back on its goroutine, maybe after the call returned.
func released(t *testing.T, l *kindsLimit) {
	t.Helper()
	eventually(t, "every permit given back", func() bool { return l.Stats().InFlight == 0 })
}

// eventually waits until cond holds, failing the test after 10s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after 10s", what)
		}
	}
}

// TestLimitHearsWhatThePolicyRetries: an attempt that fails with a code
// its method's Policy retries gives its permit back as Failed, which the
// limit counts against the server; one the Policy does not retry ends
// the call as a permanent answer, Answered to the limit.
func TestLimitHearsWhatThePolicyRetries(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *retrygrpc.Options
		want overload.Result
	}{
		{"not retried", nil, overload.Answered},
		{"retried", &retrygrpc.Options{Methods: map[string]retrygrpc.Policy{"": {RetryableCodes: []codes.Code{codes.ResourceExhausted}}}}, overload.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newKindsLimit(t, overload.AdaptiveOptions{})
			u, _ := interceptors(t, noWaits(t, 1, retry.WithOverload(&retry.OverloadOptions{Limit: l})), tc.opts)
			client, _ := start(t, &server{script: fails(codes.ResourceExhausted, 1)}, u, nil)
			if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("err %v, want RESOURCE_EXHAUSTED", err)
			}
			if _, results := l.seen(); !slices.Equal(results, []overload.Result{tc.want}) {
				t.Errorf("the limit heard %v, want [%v]", results, tc.want)
			}
		})
	}
}

// hedgingWith is hedgingOn's Retrier with limit l.
func hedgingWith(t *testing.T, clk *retrytest.Clock, l overload.Limit) *retry.Retrier {
	t.Helper()
	r, err := retry.New(retry.WithClock(clk), retry.WithHedge(&retry.HedgeOptions{Delay: hedgeDelay}),
		retry.WithMaxAttempts(2), retry.WithBackoff(retry.Constant(0)), retry.WithOverload(&retry.OverloadOptions{NoBudget: true, Limit: l}))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLimitHedgesTakePermits: a hedged call's hedge takes a permit of
// the Retrier's limit beside the first attempt's, both held while both
// are on the server, and the loser gives its permit back as dropped (it
// says nothing of the server). A limit with no room for the hedge sheds
// it: the first attempt answers alone.
func TestLimitHedgesTakePermits(t *testing.T) {
	files := idempotentFiles(t)
	t.Run("beside the first attempt", func(t *testing.T) {
		hedgeAnswers := make(chan struct{})
		srv := &server{script: []step{{hold: make(chan struct{})}, {hold: hedgeAnswers}}, entered: make(chan int, 2), gone: make(chan int, 2), byHeader: true}
		l := newKindsLimit(t, overload.AdaptiveOptions{})
		clk := retrytest.NewClock()
		u, _ := interceptors(t, hedgingWith(t, clk, l), &retrygrpc.Options{Files: files})
		client, _ := start(t, srv, u, nil)
		type result struct {
			id  string
			err error
		}
		res := make(chan result, 1)
		go func() {
			resp, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			res <- result{resp.GetServerId(), err}
		}()
		if n := received(t, srv.entered, "attempt 0"); n != 0 {
			t.Fatalf("attempt %d reached the server first, want 0", n)
		}
		clk.Add(hedgeDelay)
		received(t, srv.entered, "the hedge")
		if n := l.Stats().InFlight; n != 2 {
			t.Errorf("%d permits held while both attempts are on the server, want 2", n)
		}
		close(hedgeAnswers)
		if got := <-res; got.err != nil || got.id != "1" {
			t.Fatalf("got %q, %v: want the hedge's answer, 1", got.id, got.err)
		}
		received(t, srv.gone, "cancellation of attempt 0")
		released(t, l)
		kinds, results := l.seen()
		if !slices.Equal(kinds, []overload.Kind{overload.FirstAttempt, overload.HedgeAttempt}) {
			t.Errorf("permits for %v, want a first attempt and a hedge", kinds)
		}
		if !slices.Equal(results, []overload.Result{overload.Answered, overload.Dropped}) {
			t.Errorf("released as %v, want Answered and Dropped (the loser teaches nothing)", results)
		}
	})

	t.Run("shed by a full limit", func(t *testing.T) {
		firstAnswers := make(chan struct{})
		srv := &server{script: []step{{hold: firstAnswers}}, entered: make(chan int, 2), byHeader: true}
		l := newKindsLimit(t, overload.AdaptiveOptions{Min: 1, Max: 1})
		clk := retrytest.NewClock()
		u, _ := interceptors(t, hedgingWith(t, clk, l), &retrygrpc.Options{Files: files})
		client, _ := start(t, srv, u, nil)
		res := make(chan error, 1)
		go func() {
			_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			res <- err
		}()
		received(t, srv.entered, "attempt 0")
		clk.Add(hedgeDelay)
		eventually(t, "the hedge refused", func() bool { return l.Stats().Refused == 1 })
		close(firstAnswers)
		if err := <-res; err != nil {
			t.Fatalf("err %v: want the first attempt's answer", err)
		}
		if n := srv.count(); n != 1 {
			t.Errorf("the server saw %d attempts, want 1: the refused hedge sent nothing", n)
		}
		released(t, l)
		kinds, results := l.seen()
		if !slices.Equal(kinds, []overload.Kind{overload.FirstAttempt}) || !slices.Equal(results, []overload.Result{overload.Answered}) {
			t.Errorf("permits for %v, released as %v: want one first attempt, answered", kinds, results)
		}
		if n := l.Stats().Refused; n != 1 {
			t.Errorf("%d refusals, want 1: none later in the round", n)
		}
	})
}
