package retrygrpc_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrygrpc"
	"github.com/steadfast-go/retry/retrytest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// hedging is a Retrier that hedges after 1ms, up to n attempts.
func hedging(t testing.TB, n int) *retry.Retrier {
	t.Helper()
	r, err := retry.New(retry.WithHedge(&retry.HedgeOptions{Delay: time.Millisecond}), retry.WithMaxAttempts(n),
		retry.WithBackoff(retry.Constant(0)), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// hedgeDelay is the hedge delay of hedgingOn's Retrier.
const hedgeDelay = 150 * time.Millisecond

// hedgingOn is a Retrier on clk that hedges after hedgeDelay, up to n
// attempts: a hedge goes out only when the test advances clk, so only
// once the attempt before it has reached the server.
func hedgingOn(t testing.TB, clk *retrytest.Clock, n int) *retry.Retrier {
	t.Helper()
	r, err := retry.New(retry.WithClock(clk), retry.WithHedge(&retry.HedgeOptions{Delay: hedgeDelay}),
		retry.WithMaxAttempts(n), retry.WithBackoff(retry.Constant(0)), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// afterHedge runs call, advancing clk by the hedge delay once the server
// has seen attempt 0, whose hedge timer was armed before it was sent: the
// hedge goes out then, never before attempt 0 is on the server.
func afterHedge[T any](t *testing.T, srv *server, clk *retrytest.Clock, call func() T) T {
	t.Helper()
	res := make(chan T, 1)
	go func() { res <- call() }()
	if n := received(t, srv.entered, "attempt 0"); n != 0 {
		t.Errorf("attempt %d reached the server first, want 0", n)
	}
	clk.Add(hedgeDelay)
	return <-res
}

// received waits for a value on c, failing the test after 10s.
func received(t *testing.T, c <-chan int, what string) int {
	t.Helper()
	select {
	case n := <-c:
		return n
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s after 10s", what)
		return 0
	}
}

// TestHedge: on a method its descriptor marks IDEMPOTENT (or a Policy
// marks Hedge), a hedge starts beside a slow attempt; the first success
// wins, and the loser is cancelled on the server's side.
func TestHedge(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *retrygrpc.Options
		call func(testpb.TestServiceClient, context.Context) (string, error)
	}{
		{"descriptor IDEMPOTENT", &retrygrpc.Options{Files: idempotentFiles(t)}, func(c testpb.TestServiceClient, ctx context.Context) (string, error) {
			resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
			return resp.GetServerId(), err
		}},
		{"Policy.Hedge", &retrygrpc.Options{Methods: map[string]retrygrpc.Policy{"/grpc.testing.TestService/EmptyCall": {Hedge: true}}}, func(c testpb.TestServiceClient, ctx context.Context) (string, error) {
			_, err := c.EmptyCall(ctx, &testpb.Empty{})
			return "1", err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hold := make(chan struct{}) // never closed: attempt 0 answers only when cancelled
			srv := &server{script: []step{{hold: hold}}, entered: make(chan int, 2), gone: make(chan int, 2), byHeader: true}
			clk := retrytest.NewClock()
			u, _ := interceptors(t, hedgingOn(t, clk, 2), tc.opts)
			client, _ := start(t, srv, u, nil)
			ctx := retry.ContextWithIdempotencyKey(context.Background(), "order-42")
			type result struct {
				id  string
				err error
			}
			got := afterHedge(t, srv, clk, func() result {
				id, err := tc.call(client, ctx)
				return result{id, err}
			})
			id, err := got.id, got.err
			if err != nil || id != "1" {
				t.Fatalf("got %q, %v: want the hedge's answer, 1", id, err)
			}
			if n := received(t, srv.gone, "cancellation of the slow attempt"); n != 0 {
				t.Errorf("attempt %d was cancelled, want 0", n)
			}
			if got := srv.count(); got != 2 {
				t.Errorf("the server saw %d attempts, want 2", got)
			}
			for n := range 2 {
				if got := srv.incoming(n, retrygrpc.IdempotencyKeyHeader); !equal(got, []string{"order-42"}) {
					t.Errorf("attempt %d: key %q", n, got)
				}
			}
			if got := srv.incoming(1, retrygrpc.PreviousAttemptsHeader); !equal(got, []string{"1"}) {
				t.Errorf("the hedge: %s = %q, want [1]", retrygrpc.PreviousAttemptsHeader, got)
			}
		})
	}
}

// TestHedgeFailures: a retryable failure of one attempt lets the other
// run (A6's non-fatal codes); any other ends the call.
func TestHedgeFailures(t *testing.T) {
	files := idempotentFiles(t)
	t.Run("non-fatal", func(t *testing.T) {
		hold := make(chan struct{})
		srv := &server{script: []step{{hold: hold, code: codes.OK}, {code: codes.Unavailable}}, entered: make(chan int, 3), byHeader: true}
		u, _ := interceptors(t, hedging(t, 2), &retrygrpc.Options{Files: files})
		client, _ := start(t, srv, u, nil)
		go func() {
			received(t, srv.entered, "attempt 0")
			received(t, srv.entered, "the hedge")
			close(hold) // once the hedge has failed or is failing
		}()
		resp, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		if err != nil || resp.GetServerId() != "0" {
			t.Fatalf("got %q, %v: want attempt 0's answer", resp.GetServerId(), err)
		}
	})
	t.Run("fatal", func(t *testing.T) {
		hold := make(chan struct{})
		srv := &server{script: []step{{hold: hold}, {code: codes.InvalidArgument}}, entered: make(chan int, 2), gone: make(chan int, 2), byHeader: true}
		clk := retrytest.NewClock()
		u, _ := interceptors(t, hedgingOn(t, clk, 2), &retrygrpc.Options{Files: files})
		client, _ := start(t, srv, u, nil)
		err := afterHedge(t, srv, clk, func() error {
			_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			return err
		})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("err %v, want the hedge's INVALID_ARGUMENT", err)
		}
		received(t, srv.gone, "cancellation of attempt 0")
	})
}

// TestNotHedged: a method neither its descriptor nor a Policy marks safe
// is never hedged, even by a Retrier that hedges.
func TestNotHedged(t *testing.T) {
	hold := make(chan struct{})
	time.AfterFunc(10*time.Millisecond, func() { close(hold) }) // 10x the hedge delay
	srv := &server{script: []step{{hold: hold}}}
	u, _ := interceptors(t, hedging(t, 3), nil)
	client, _ := start(t, srv, u, nil)
	if _, err := client.EmptyCall(context.Background(), &testpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if got := srv.count(); got != 1 {
		t.Errorf("the server saw %d attempts, want 1", got)
	}
}

// TestIdempotencyKeys: a call's key goes out on every attempt, the same
// one, in the header Options name; it is never in the error.
func TestIdempotencyKeys(t *testing.T) {
	t.Run("from the context", func(t *testing.T) {
		srv := &server{script: fails(codes.Unavailable, 3)}
		u, _ := interceptors(t, noWaits(t, 3), nil)
		client, _ := start(t, srv, u, nil)
		ctx := retry.ContextWithIdempotencyKey(context.Background(), "order-42")
		_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{})
		if status.Code(err) != codes.Unavailable || strings.Contains(err.Error(), "order-42") {
			t.Fatalf("err %v: want UNAVAILABLE, without the key", err)
		}
		for n := range 3 {
			if got := srv.incoming(n, retrygrpc.IdempotencyKeyHeader); !equal(got, []string{"order-42"}) {
				t.Errorf("attempt %d: key %q", n, got)
			}
		}
	})
	t.Run("generated, renamed", func(t *testing.T) {
		srv := &server{script: fails(codes.Aborted, 1)}
		u, s := interceptors(t, noWaits(t, 3), &retrygrpc.Options{IdempotencyKeys: true, IdempotencyKeyHeader: "x-request-key"})
		client, _ := start(t, srv, u, s)
		if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
			t.Fatal(err) // ABORTED is retried: a keyed call is idempotent
		}
		k0, k1 := srv.incoming(0, "x-request-key"), srv.incoming(1, "x-request-key")
		if len(k0) != 1 || len(k0[0]) != 36 || !equal(k0, k1) {
			t.Errorf("keys %q and %q: want one UUID on both attempts", k0, k1)
		}
		if got := srv.incoming(0, retrygrpc.IdempotencyKeyHeader); got != nil {
			t.Errorf("the default header carries %q", got)
		}
	})
	t.Run("stream", func(t *testing.T) {
		srv := &server{script: fails(codes.Unavailable, 1)}
		_, s := interceptors(t, noWaits(t, 3), nil)
		client, _ := start(t, srv, nil, s)
		ctx := retry.ContextWithIdempotencyKey(context.Background(), "order-42")
		stream, err := client.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
		for n := range 2 {
			if got := srv.incoming(n, retrygrpc.IdempotencyKeyHeader); !equal(got, []string{"order-42"}) {
				t.Errorf("attempt %d: key %q", n, got)
			}
		}
	})
}

// TestManyCalls: 1,000 concurrent calls, unary and streaming, where 20 %
// of the attempts fail UNAVAILABLE; every failure but a call's last is
// followed by exactly one attempt. TestMain's goleak finds any goroutine
// left behind.
func TestManyCalls(t *testing.T) {
	srv := &server{failEvery: 5}
	u, s := interceptors(t, noWaits(t, 4), nil)
	client, _ := start(t, srv, u, s)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed int
	)
	for i := range 1000 {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				_, err = client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			} else {
				var stream grpc.ServerStreamingClient[testpb.StreamingOutputCallResponse]
				if stream, err = client.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{}); err == nil {
					_, err = stream.Recv()
				}
			}
			if err != nil {
				if status.Code(err) != codes.Unavailable || !errors.Is(err, retry.ErrExhausted) {
					t.Errorf("call %d: %v", i, err)
				}
				mu.Lock()
				failed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if got, want := srv.count(), 1000+srv.unavailable()-failed; got != want {
		t.Errorf("the server saw %d attempts, want 1000 calls + %d failures - %d calls that failed = %d", got, srv.unavailable(), failed, want)
	}
}

// TestDoubleRetries: with grpc-go's own retries on (a service config's
// retryPolicy, no WithDisableRetry), each of the interceptor's attempts
// is several of grpc-go's: the server sees the product.
func TestDoubleRetries(t *testing.T) {
	const sc = `{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}], "retryPolicy": {
		"maxAttempts": 2, "initialBackoff": "0.001s", "maxBackoff": "0.001s", "backoffMultiplier": 1,
		"retryableStatusCodes": ["UNAVAILABLE"]}}]}`
	u, _ := interceptors(t, noWaits(t, 3), nil)
	for _, tc := range []struct {
		name   string
		dial   []grpc.DialOption
		served int
	}{
		{"both on", []grpc.DialOption{grpc.WithDefaultServiceConfig(sc)}, 3 * 2},
		{"grpc-go's off", []grpc.DialOption{grpc.WithDefaultServiceConfig(sc), grpc.WithDisableRetry()}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &server{script: fails(codes.Unavailable, 10)}
			client, cc := start(t, srv, u, nil, tc.dial...)
			_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("err %v", err)
			}
			if got := srv.count(); got != tc.served {
				t.Errorf("the server saw %d attempts, want %d", got, tc.served)
			}
			// What can be detected: the service config has a retry
			// policy, whether or not WithDisableRetry turned it off.
			if !retrygrpc.ServiceConfigRetries(cc, testpb.TestService_UnaryCall_FullMethodName) {
				t.Error("ServiceConfigRetries: false")
			}
		})
	}
	t.Run("no service config", func(t *testing.T) {
		_, cc := start(t, &server{}, u, nil)
		if retrygrpc.ServiceConfigRetries(cc, testpb.TestService_UnaryCall_FullMethodName) {
			t.Error("ServiceConfigRetries: true")
		}
	})
}

// TestHedgeAtOnceAfterAFailure: a hedge that fails with a non-fatal code
// while attempt 0 still runs sends the next hedge at once, as A6 does,
// not after another hedge delay: on the mock clock, attempt 2 reaches
// the server while the clock stands still.
func TestHedgeAtOnceAfterAFailure(t *testing.T) {
	hold := make(chan struct{}) // never closed: attempt 0 answers only when cancelled
	srv := &server{script: []step{{hold: hold}, {code: codes.Unavailable}}, entered: make(chan int, 3), gone: make(chan int, 3), byHeader: true}
	clk := retrytest.NewClock()
	u, _ := interceptors(t, hedgingOn(t, clk, 3), &retrygrpc.Options{Files: idempotentFiles(t)})
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
	if n := received(t, srv.entered, "the first hedge"); n != 1 {
		t.Fatalf("attempt %d, want the first hedge, 1", n)
	}
	// From here the clock stands still: Add(0) runs the timers due now,
	// so only a hedge sent at once reaches the server.
	stuck := time.After(5 * time.Second)
	for waiting := true; waiting; {
		select {
		case n := <-srv.entered:
			if n != 2 {
				t.Fatalf("attempt %d, want the second hedge, 2", n)
			}
			waiting = false
		case <-stuck:
			t.Fatal("no second hedge after the first failed, with the clock standing still: it waits for the hedge delay")
		case <-time.After(time.Millisecond):
			clk.Add(0)
		}
	}
	got := <-res
	if got.err != nil || got.id != "2" {
		t.Fatalf("got %q, %v: want the second hedge's answer, 2", got.id, got.err)
	}
	if n := received(t, srv.gone, "cancellation of attempt 0"); n != 0 {
		t.Errorf("attempt %d was cancelled, want 0", n)
	}
}
