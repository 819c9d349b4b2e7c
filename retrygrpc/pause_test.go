package retrygrpc_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrygrpc"
	"github.com/steadfast-go/retry/retrytest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The tests of a pause and a rate through the interceptor run on a real
// server over TCP loopback, with the Retrier, the pause and the rate on
// one mock clock: a held call cannot go before the test moves the clock
// past the pause's end, and the server notes the clock at each arrival.

// pauseSpread is the spread of the tests' pauses.
const pauseSpread = 100 * time.Millisecond

// pausingServer fails its first UnaryCall with first, if set, and answers
// every other call; it notes the mock clock's time since it was built at
// each UnaryCall, and counts the EmptyCalls.
type pausingServer struct {
	testpb.UnimplementedTestServiceServer
	clk   *retrytest.Clock
	start time.Time
	first func(ctx context.Context) error

	mu    sync.Mutex
	unary []time.Duration
	empty int
}

func newPausingServer(clk *retrytest.Clock, first func(context.Context) error) *pausingServer {
	return &pausingServer{clk: clk, start: clk.Now(), first: first}
}

func (s *pausingServer) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.mu.Lock()
	n := len(s.unary)
	s.unary = append(s.unary, s.clk.Now().Sub(s.start))
	s.mu.Unlock()
	if n == 0 && s.first != nil {
		return nil, s.first(ctx)
	}
	return &testpb.SimpleResponse{}, nil
}

func (s *pausingServer) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	s.mu.Lock()
	s.empty++
	s.mu.Unlock()
	return &testpb.Empty{}, nil
}

// arrivals returns the times of the UnaryCalls, and the EmptyCalls' count.
func (s *pausingServer) arrivals() ([]time.Duration, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.unary...), s.empty
}

// pushback fails with UNAVAILABLE and a pushback of ms.
func pushback(ms string) func(context.Context) error {
	return func(ctx context.Context) error {
		grpc.SetTrailer(ctx, metadata.Pairs(retrygrpc.PushbackTrailer, ms))
		return status.Error(codes.Unavailable, "shed")
	}
}

// retryInfo fails with code and a google.rpc.RetryInfo of delay.
func retryInfo(code codes.Code, delay *durationpb.Duration) func(context.Context) error {
	return func(context.Context) error {
		st, err := status.New(code, "over quota").WithDetails(&errdetails.RetryInfo{RetryDelay: delay})
		if err != nil {
			panic(err)
		}
		return st.Err()
	}
}

// alsoExhausted retries RESOURCE_EXHAUSTED besides UNAVAILABLE.
var alsoExhausted = map[string]retrygrpc.Policy{"": {RetryableCodes: []codes.Code{codes.Unavailable, codes.ResourceExhausted}}}

// guarded returns a Retrier on clk with the guard g and no budget, whose
// backoff is backoff.
func guarded(t *testing.T, clk *retrytest.Clock, g retry.OverloadOptions, backoff time.Duration) *retry.Retrier {
	t.Helper()
	g.NoBudget = true
	r, err := retry.New(retry.WithClock(clk), retry.WithOverload(&g), retry.WithMaxAttempts(3),
		retry.WithBackoff(retry.Constant(backoff)), retry.WithJitter(retry.NoJitter))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newPause(t *testing.T, o overload.PauseOptions) *overload.Pause {
	t.Helper()
	p, err := overload.NewPause(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// armedHold receives the next wait Do armed, which must end within the
// spread after a pause of 1s.
func armedHold(t *testing.T, clk *retrytest.Clock, what string) {
	t.Helper()
	select {
	case d := <-clk.Armed():
		if d < time.Second || d >= time.Second+pauseSpread {
			t.Errorf("%s: held %v, want 1s and a share of the %v spread", what, d, pauseSpread)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no wait armed after 10s", what)
	}
}

func asyncUnary(client testpb.TestServiceClient, ctx context.Context) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{})
		ch <- err
	}()
	return ch
}

// TestPause_aServerDelayHoldsEveryCallUntilTheReset: one pushback of
// 1000 ms, or one RESOURCE_EXHAUSTED with a RetryInfo of 1s, pauses the
// downstream; every other call through the interceptor, first attempts
// included, is held until then and goes within the spread after it,
// none reaching the server before.
func TestPause_aServerDelayHoldsEveryCallUntilTheReset(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first func(context.Context) error
		opts  *retrygrpc.Options
	}{
		{"pushback", pushback("1000"), nil},
		{"retry info", retryInfo(codes.ResourceExhausted, durationpb.New(time.Second)), &retrygrpc.Options{Methods: alsoExhausted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := retrytest.NewClock()
			srv := newPausingServer(clk, tc.first)
			p := newPause(t, overload.PauseOptions{Spread: pauseSpread, Clock: clk.Mock})
			u, _ := interceptors(t, guarded(t, clk, retry.OverloadOptions{Pause: p}, 0), tc.opts)
			client, _ := start(t, srv, u, nil)

			first := asyncUnary(client, context.Background())
			armedHold(t, clk, "the failed call's retry")
			if !p.Paused() {
				t.Fatal("the server's delay did not pause the downstream")
			}
			const held = 8
			var calls []<-chan error
			for range held {
				calls = append(calls, asyncUnary(client, context.Background()))
				armedHold(t, clk, "a call made during the pause")
			}
			if at, _ := srv.arrivals(); len(at) != 1 {
				t.Fatalf("%d calls reached the server during the pause, want only the first", len(at))
			}

			clk.Add(time.Second + pauseSpread)
			for _, ch := range append(calls, first) {
				if err := <-ch; err != nil {
					t.Errorf("a held call: %v", err)
				}
			}
			at, _ := srv.arrivals()
			if len(at) != held+2 {
				t.Fatalf("the server saw %d calls, want %d: each held call in one attempt", len(at), held+2)
			}
			for _, a := range at[1:] {
				if a < time.Second {
					t.Errorf("a call reached the server at %v, before the reset at 1s", a)
				}
			}
		})
	}
}

// TestRetryInfoWait: a RetryInfo's retry_delay is the next wait, as a
// pushback is, on a code the Policy retries; a pushback wins over it; a
// negative or invalid one is ignored; it makes no code retryable.
func TestRetryInfoWait(t *testing.T) {
	const backoff = 5 * time.Second
	both := func(ctx context.Context) error {
		grpc.SetTrailer(ctx, metadata.Pairs(retrygrpc.PushbackTrailer, "100"))
		return retryInfo(codes.Unavailable, durationpb.New(250*time.Millisecond))(ctx)
	}
	for _, tc := range []struct {
		name   string
		first  func(context.Context) error
		opts   *retrygrpc.Options
		wait   time.Duration // -1: not retried
		served int
	}{
		{"UNAVAILABLE", retryInfo(codes.Unavailable, durationpb.New(250*time.Millisecond)), nil, 250 * time.Millisecond, 2},
		{"RESOURCE_EXHAUSTED retried", retryInfo(codes.ResourceExhausted, durationpb.New(2*time.Second)), &retrygrpc.Options{Methods: alsoExhausted}, 2 * time.Second, 2},
		{"RESOURCE_EXHAUSTED not retried", retryInfo(codes.ResourceExhausted, durationpb.New(2*time.Second)), nil, -1, 1},
		{"pushback wins", both, nil, 100 * time.Millisecond, 2},
		{"negative", retryInfo(codes.Unavailable, durationpb.New(-time.Second)), nil, backoff, 2},
		{"invalid", retryInfo(codes.Unavailable, &durationpb.Duration{Seconds: 1, Nanos: -5}), nil, backoff, 2},
		{"no delay", retryInfo(codes.Unavailable, nil), nil, backoff, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := retrytest.NewClock()
			srv := newPausingServer(clk, tc.first)
			u, _ := interceptors(t, guarded(t, clk, retry.OverloadOptions{}, backoff), tc.opts)
			client, _ := start(t, srv, u, nil)
			done := asyncUnary(client, context.Background())
			if tc.wait >= 0 {
				select {
				case d := <-clk.Armed():
					if d != tc.wait {
						t.Errorf("armed %v, want %v", d, tc.wait)
					}
					clk.Add(d)
				case <-time.After(10 * time.Second):
					t.Fatal("no wait armed after 10s")
				}
			}
			err := <-done
			if tc.wait >= 0 && err != nil {
				t.Errorf("the retried call: %v", err)
			}
			if tc.wait < 0 && status.Code(err) != codes.ResourceExhausted {
				t.Errorf("err %v, want RESOURCE_EXHAUSTED", err)
			}
			if at, _ := srv.arrivals(); len(at) != tc.served {
				t.Errorf("the server saw %d attempts, want %d", len(at), tc.served)
			}
		})
	}
}

// TestPause_aDeadlineBeforeTheResetIsRefusedUnsent: a call whose deadline
// comes before the pause's end is refused at once, unsent, with an error
// matching overload.ErrPaused.
func TestPause_aDeadlineBeforeTheResetIsRefusedUnsent(t *testing.T) {
	clk := retrytest.NewClock()
	srv := newPausingServer(clk, pushback("30000"))
	p := newPause(t, overload.PauseOptions{Spread: pauseSpread, Clock: clk.Mock})
	u, _ := interceptors(t, guarded(t, clk, retry.OverloadOptions{Pause: p}, 0), nil)
	client, _ := start(t, srv, u, nil)

	first := asyncUnary(client, context.Background())
	<-clk.Armed()
	ctx, cancel := clk.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{})
	if !errors.Is(err, overload.ErrPaused) || overload.RefuserOf(err) != overload.RefusedByPause {
		t.Errorf("err %v, want one matching overload.ErrPaused", err)
	}
	if status.Code(err) != codes.Unavailable {
		t.Errorf("code %v, want UNAVAILABLE", status.Code(err))
	}
	if at, _ := srv.arrivals(); len(at) != 1 {
		t.Errorf("the server saw %d calls, want 1: the refused call sent nothing", len(at))
	}
	clk.Add(30*time.Second + pauseSpread)
	if err := <-first; err != nil {
		t.Errorf("the first call: %v", err)
	}
}

// TestRate_refusesPastItsRateBeforeSending: calls past the Retrier's
// OverloadOptions.Rate are refused unsent, UNAVAILABLE and matching
// overload.ErrRateLimited, and go again once the rate has room.
func TestRate_refusesPastItsRateBeforeSending(t *testing.T) {
	clk := retrytest.NewClock()
	srv := newPausingServer(clk, nil)
	rate, err := overload.NewRate(overload.RateOptions{PerSecond: 2, Clock: clk.Mock})
	if err != nil {
		t.Fatal(err)
	}
	u, s := interceptors(t, guarded(t, clk, retry.OverloadOptions{Rate: rate}, 0), nil)
	client, _ := start(t, srv, u, s)
	for range 2 {
		if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
			t.Fatalf("within the burst: %v", err)
		}
	}
	_, err = client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if !errors.Is(err, overload.ErrRateLimited) || status.Code(err) != codes.Unavailable {
		t.Errorf("err %v (%v), want UNAVAILABLE matching overload.ErrRateLimited", err, status.Code(err))
	}
	stream, err := client.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if !errors.Is(err, overload.ErrRateLimited) {
		t.Errorf("a stream past the rate: %v, want an error matching overload.ErrRateLimited", err)
	}
	if at, _ := srv.arrivals(); len(at) != 2 {
		t.Errorf("the server saw %d calls, want 2: the refused ones sent nothing", len(at))
	}
	clk.Add(500 * time.Millisecond)
	if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
		t.Errorf("room again after 1/PerSecond: %v", err)
	}
}

// TestPartitionByMethod: with a Partitioned pause and rate, a pushback on
// one method holds that method's calls only, and each method has its own
// rate.
func TestPartitionByMethod(t *testing.T) {
	opts := &retrygrpc.Options{Partition: retrygrpc.PartitionByMethod}
	t.Run("pause", func(t *testing.T) {
		clk := retrytest.NewClock()
		srv := newPausingServer(clk, pushback("1000"))
		p := newPause(t, overload.PauseOptions{Spread: pauseSpread, Partitioned: true, Clock: clk.Mock})
		u, _ := interceptors(t, guarded(t, clk, retry.OverloadOptions{Pause: p}, 0), opts)
		client, _ := start(t, srv, u, nil)

		first := asyncUnary(client, context.Background())
		armedHold(t, clk, "the failed call's retry")
		held := asyncUnary(client, context.Background())
		armedHold(t, clk, "another call of the paused method")
		// A call of another method that were held would arm a wait:
		// taken here, it times out (a real timeout) rather than hang.
		stray, stop := make(chan time.Duration, 1), make(chan struct{})
		go func() {
			select {
			case d := <-clk.Armed():
				stray <- d
			case <-stop:
			}
		}()
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := client.EmptyCall(ctx, &testpb.Empty{})
			cancel()
			if err != nil {
				t.Fatalf("another method is not paused: %v", err)
			}
		}
		close(stop)
		select {
		case d := <-stray:
			t.Fatalf("a call of another method was held %v", d)
		default:
		}
		if at, empty := srv.arrivals(); len(at) != 1 || empty != 3 {
			t.Errorf("the server saw %d UnaryCalls and %d EmptyCalls, want 1 and 3", len(at), empty)
		}
		clk.Add(time.Second + pauseSpread)
		for _, ch := range []<-chan error{first, held} {
			if err := <-ch; err != nil {
				t.Errorf("a held call: %v", err)
			}
		}
	})
	t.Run("rate", func(t *testing.T) {
		clk := retrytest.NewClock()
		srv := newPausingServer(clk, nil)
		rate, err := overload.NewRate(overload.RateOptions{PerSecond: 1, Partitioned: true, Clock: clk.Mock})
		if err != nil {
			t.Fatal(err)
		}
		u, _ := interceptors(t, guarded(t, clk, retry.OverloadOptions{Rate: rate}, 0), opts)
		client, _ := start(t, srv, u, nil)
		if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); !errors.Is(err, overload.ErrRateLimited) {
			t.Errorf("the method's second call in its second: %v, want overload.ErrRateLimited", err)
		}
		if _, err := client.EmptyCall(context.Background(), &testpb.Empty{}); err != nil {
			t.Errorf("another method has a rate of its own: %v", err)
		}
	})
}

// TestPartition_keyInNoErrorNorMetadata: a partition key of the caller's
// is in no error text, and does not reach the server.
func TestPartition_keyInNoErrorNorMetadata(t *testing.T) {
	const key = "tenant-4711"
	clk := retrytest.NewClock()
	srv := &server{}
	rate, err := overload.NewRate(overload.RateOptions{PerSecond: 1, Partitioned: true, Clock: clk.Mock})
	if err != nil {
		t.Fatal(err)
	}
	opts := &retrygrpc.Options{Partition: func(context.Context, string) string { return key }}
	u, _ := interceptors(t, guarded(t, clk, retry.OverloadOptions{Rate: rate}, 0), opts)
	client, _ := start(t, srv, u, nil)
	if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err = client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if !errors.Is(err, overload.ErrRateLimited) {
		t.Fatalf("err %v, want overload.ErrRateLimited", err)
	}
	if strings.Contains(err.Error(), key) || strings.Contains(status.Convert(err).Message(), key) {
		t.Errorf("the key is in the error: %v", err)
	}
	for k, v := range srv.md[0] {
		if strings.Contains(k, key) || strings.Contains(strings.Join(v, " "), key) {
			t.Errorf("the key reached the server in %s: %v", k, v)
		}
	}
}
