package retrygrpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrygrpc"
	"github.com/steadfast-go/retry/retrytest"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// interceptors builds both interceptors of r and opts.
func interceptors(t testing.TB, r *retry.Retrier, opts *retrygrpc.Options) (grpc.UnaryClientInterceptor, grpc.StreamClientInterceptor) {
	t.Helper()
	u, err := retrygrpc.UnaryClientInterceptor(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := retrygrpc.StreamClientInterceptor(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	return u, s
}

// noWaits is a Retrier of n attempts without waits or budget.
func noWaits(t testing.TB, n int, more ...retry.Option) *retry.Retrier {
	t.Helper()
	r, err := retry.New(append([]retry.Option{retry.WithMaxAttempts(n), retry.WithBackoff(retry.Constant(0)), retry.WithOverload(&retry.OverloadOptions{NoBudget: true})}, more...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// idempotentFiles returns a registry where UnaryCall's descriptor declares
// idempotency_level IDEMPOTENT, and nothing else changed.
func idempotentFiles(t testing.TB) *protoregistry.Files {
	t.Helper()
	fdp := protodesc.ToFileDescriptorProto(testpb.File_grpc_testing_test_proto)
	for _, svc := range fdp.Service {
		if svc.GetName() != "TestService" {
			continue
		}
		for _, m := range svc.Method {
			if m.GetName() == "UnaryCall" {
				if m.Options == nil {
					m.Options = &descriptorpb.MethodOptions{}
				}
				m.Options.IdempotencyLevel = descriptorpb.MethodOptions_IDEMPOTENT.Enum()
			}
		}
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	files := new(protoregistry.Files)
	if err := files.RegisterFile(fd); err != nil {
		t.Fatal(err)
	}
	return files
}

func fails(c codes.Code, n int) []step {
	s := make([]step, n)
	for i := range s {
		s[i].code = c
	}
	return s
}

// TestConformanceUnary is gRFC A6's behaviours for unary calls, each
// asserted on the server's own count of attempts.
func TestConformanceUnary(t *testing.T) {
	idem := idempotentFiles(t)
	cases := []struct {
		name     string
		script   []step
		opts     *retrygrpc.Options
		attempts int        // the Retrier's max attempts
		want     codes.Code // the call's code
		served   int        // attempts the server saw
	}{
		{name: "UNAVAILABLE is retried", script: fails(codes.Unavailable, 2), attempts: 3, want: codes.OK, served: 3},
		{name: "UNAVAILABLE until attempts run out", script: fails(codes.Unavailable, 5), attempts: 3, want: codes.Unavailable, served: 3},
		{name: "INTERNAL is not retried", script: fails(codes.Internal, 1), attempts: 3, want: codes.Internal, served: 1},
		{name: "INVALID_ARGUMENT is not retried", script: fails(codes.InvalidArgument, 1), attempts: 3, want: codes.InvalidArgument, served: 1},
		{name: "NOT_FOUND is not retried", script: fails(codes.NotFound, 1), attempts: 3, want: codes.NotFound, served: 1},
		{name: "RESOURCE_EXHAUSTED is not retried", script: fails(codes.ResourceExhausted, 1), attempts: 3, want: codes.ResourceExhausted, served: 1},
		{name: "ABORTED is not retried on a method not idempotent", script: fails(codes.Aborted, 1), attempts: 3, want: codes.Aborted, served: 1},
		{name: "ABORTED is retried on a method its descriptor marks IDEMPOTENT", script: fails(codes.Aborted, 1), opts: &retrygrpc.Options{Files: idem}, attempts: 3, want: codes.OK, served: 2},
		{name: "DEADLINE_EXCEEDED from the server is retried on an idempotent method", script: fails(codes.DeadlineExceeded, 1), opts: &retrygrpc.Options{Files: idem}, attempts: 3, want: codes.OK, served: 2},
		{name: "a code listed for the method is retried", script: fails(codes.Internal, 1),
			opts: &retrygrpc.Options{Methods: map[string]retrygrpc.Policy{"/grpc.testing.TestService/UnaryCall": {RetryableCodes: []codes.Code{codes.Internal}}}}, attempts: 3, want: codes.OK, served: 2},
		{name: "a code listed for the service is retried", script: fails(codes.Internal, 1),
			opts: &retrygrpc.Options{Methods: map[string]retrygrpc.Policy{"grpc.testing.TestService": {RetryableCodes: []codes.Code{codes.Internal}}}}, attempts: 3, want: codes.OK, served: 2},
		{name: "the method's entry wins over its service's", script: fails(codes.Internal, 1),
			opts: &retrygrpc.Options{Methods: map[string]retrygrpc.Policy{
				"grpc.testing.TestService":            {RetryableCodes: []codes.Code{codes.Internal}},
				"/grpc.testing.TestService/UnaryCall": {RetryableCodes: []codes.Code{codes.Unavailable}},
			}}, attempts: 3, want: codes.Internal, served: 1},
		{name: "an empty list retries nothing", script: fails(codes.Unavailable, 1),
			opts: &retrygrpc.Options{Methods: map[string]retrygrpc.Policy{"": {RetryableCodes: []codes.Code{}}}}, attempts: 3, want: codes.Unavailable, served: 1},
		{name: "pushback 0 retries", script: []step{{code: codes.Unavailable, pushback: []string{"0"}}}, attempts: 3, want: codes.OK, served: 2},
		{name: "negative pushback stops", script: []step{{code: codes.Unavailable, pushback: []string{"-1"}}}, attempts: 3, want: codes.Unavailable, served: 1},
		{name: "malformed pushback stops", script: []step{{code: codes.Unavailable, pushback: []string{"soon"}}}, attempts: 3, want: codes.Unavailable, served: 1},
		{name: "two pushback values stop", script: []step{{code: codes.Unavailable, pushback: []string{"0", "1"}}}, attempts: 3, want: codes.Unavailable, served: 1},
		{name: "pushback does not make a code retryable", script: []step{{code: codes.Internal, pushback: []string{"0"}}}, attempts: 3, want: codes.Internal, served: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := &server{script: tc.script}
			u, _ := interceptors(t, noWaits(t, tc.attempts), tc.opts)
			client, _ := start(t, srv, u, nil)
			_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			if got := status.Code(err); got != tc.want {
				t.Errorf("code %v, want %v (%v)", got, tc.want, err)
			}
			if got := srv.count(); got != tc.served {
				t.Errorf("the server saw %d attempts, want %d", got, tc.served)
			}
		})
	}
}

// TestPushbackWait: a valid pushback is the next wait, exactly, as
// retry.After, instead of the backoff.
func TestPushbackWait(t *testing.T) {
	clk := retrytest.NewClock()
	r, err := retry.New(retry.WithClock(clk), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithBackoff(retry.Constant(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	srv := &server{script: []step{{code: codes.Unavailable, pushback: []string{"250"}}}}
	u, _ := interceptors(t, r, nil)
	client, _ := start(t, srv, u, nil)
	go func() {
		d := <-clk.Armed()
		if d != 250*time.Millisecond {
			t.Errorf("armed %v, want the pushback's 250ms", d)
		}
		clk.Add(d)
	}()
	if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := srv.count(); got != 2 {
		t.Errorf("the server saw %d attempts, want 2", got)
	}
}

// TestBackoffAfterPushback: a pushback is the next wait; after it the
// Retrier's schedule goes on by attempt number, or, with
// Options.RestartBackoffAfterPushback, restarts at its first wait, as in
// A6 and grpc-go (100ms, x4: waits 100/10/100/400ms, not 100/10/1.6s/6.4s).
func TestBackoffAfterPushback(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name    string
		restart bool
		waits   []time.Duration
	}{
		{"default: the schedule goes on", false, []time.Duration{100 * ms, 10 * ms, 1600 * ms, 6400 * ms}},
		{"RestartBackoffAfterPushback", true, []time.Duration{100 * ms, 10 * ms, 100 * ms, 400 * ms}},
	} {
		for _, streaming := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/streaming=%v", tc.name, streaming), func(t *testing.T) {
				clk := retrytest.NewClock()
				r, err := retry.New(retry.WithClock(clk), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithMaxAttempts(5),
					retry.WithBackoff(retry.Exponential(100*ms, 4, time.Minute)), retry.WithJitter(retry.NoJitter))
				if err != nil {
					t.Fatal(err)
				}
				script := fails(codes.Unavailable, 4)
				script[1].pushback = []string{"10"}
				srv := &server{script: script}
				u, s := interceptors(t, r, &retrygrpc.Options{RestartBackoffAfterPushback: tc.restart})
				client, _ := start(t, srv, u, s)
				var got []time.Duration
				done := make(chan struct{})
				go func() {
					defer close(done)
					for range tc.waits {
						d := <-clk.Armed()
						got = append(got, d)
						clk.Add(d)
					}
				}()
				if streaming {
					stream, err := client.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
					if err == nil {
						_, err = stream.Recv()
					}
					if err != nil {
						t.Fatal(err)
					}
				} else if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
					t.Fatal(err)
				}
				<-done
				if !slices.Equal(got, tc.waits) {
					t.Errorf("waits %v, want %v", got, tc.waits)
				}
				if n := srv.count(); n != 5 {
					t.Errorf("the server saw %d attempts, want 5", n)
				}
			})
		}
	}
}

// TestPreviousAttempts: grpc-previous-rpc-attempts on every attempt but
// the first, counting those before it.
func TestPreviousAttempts(t *testing.T) {
	srv := &server{script: fails(codes.Unavailable, 2)}
	u, s := interceptors(t, noWaits(t, 3), nil)
	client, _ := start(t, srv, u, s)
	if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	for n, want := range [][]string{nil, {"1"}, {"2"}} {
		if got := srv.incoming(n, retrygrpc.PreviousAttemptsHeader); !equal(got, want) {
			t.Errorf("attempt %d: %s = %q, want %q", n, retrygrpc.PreviousAttemptsHeader, got, want)
		}
	}

	srv2 := &server{script: fails(codes.Unavailable, 1)}
	client2, _ := start(t, srv2, u, s)
	stream, err := client2.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	if got := srv2.incoming(1, retrygrpc.PreviousAttemptsHeader); !equal(got, []string{"1"}) {
		t.Errorf("stream attempt 1: %q, want [1]", got)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestThrottling is A6's retry throttling with its example bucket
// (MaxTokens 10, TokenRatio 0.1): each failure takes a token, each
// success gives back 0.1, and retries stop while the bucket holds half
// or less.
func TestThrottling(t *testing.T) {
	b, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Budget: b}), retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)))
	if err != nil {
		t.Fatal(err)
	}
	srv := &server{}
	u, _ := interceptors(t, r, nil)
	client, _ := start(t, srv, u, nil)
	call := func(c codes.Code) int {
		srv.mu.Lock()
		srv.script, srv.attempts = fails(c, 3), 0
		srv.md, srv.received, srv.cancelled = nil, nil, nil
		srv.mu.Unlock()
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		if status.Code(err) != c {
			t.Fatalf("code %v, want %v", status.Code(err), c)
		}
		return srv.count()
	}
	// 10 tokens: 3 failures (7 left), then 2 (5 left: no more retries),
	// then 1 (4 left) and every call after it gets one attempt.
	for i, want := range []int{3, 2, 1, 1} {
		if got := call(codes.Unavailable); got != want {
			t.Fatalf("failing call %d: the server saw %d attempts, want %d (tokens %v)", i, got, want, b.Tokens())
		}
	}
	// 3 tokens: 20 successes bring them to 5.0, not above half: the
	// next failure (to 4.0) gets no retry.
	for i := range 20 {
		call(codes.OK)
		if i == 19 && b.Tokens() > 5 {
			t.Fatalf("tokens %v after 20 successes", b.Tokens())
		}
	}
	if got := call(codes.Unavailable); got != 1 {
		t.Fatalf("at %v tokens: %d attempts, want 1", b.Tokens(), got)
	}
	// 21 successes: 6.1; a failure takes it to 5.1, above half: one
	// retry, whose failure leaves 4.1.
	for range 21 {
		call(codes.OK)
	}
	if got := call(codes.Unavailable); got != 2 {
		t.Fatalf("at %v tokens: %d attempts, want 2", b.Tokens(), got)
	}
}

// TestDeadline: no wait that cannot end before the call's deadline; the
// call returns at once with the last status.
func TestDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		step step
		r    []retry.Option
	}{
		{"backoff past the deadline", step{code: codes.Unavailable}, []retry.Option{retry.WithBackoff(retry.Constant(time.Hour))}},
		{"pushback past the deadline", step{code: codes.Unavailable, pushback: []string{"3600000"}}, []retry.Option{retry.WithMaxDelay(2 * time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No jitter: a full-jittered hour is under the minute's
			// deadline once in 60 runs, and the call would wait it.
			r, err := retry.New(append([]retry.Option{retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithJitter(retry.NoJitter)}, tc.r...)...)
			if err != nil {
				t.Fatal(err)
			}
			srv := &server{script: []step{tc.step}}
			u, _ := interceptors(t, r, nil)
			client, _ := start(t, srv, u, nil)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			began := time.Now()
			_, err = client.UnaryCall(ctx, &testpb.SimpleRequest{})
			if took := time.Since(began); took > 10*time.Second {
				t.Errorf("returned after %v", took)
			}
			if status.Code(err) != codes.Unavailable || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err %v: want UNAVAILABLE, matching context.DeadlineExceeded", err)
			}
			if got := srv.count(); got != 1 {
				t.Errorf("the server saw %d attempts, want 1", got)
			}
		})
	}
}

// TestCancelled: a call whose context ended is not retried.
func TestCancelled(t *testing.T) {
	hold := make(chan struct{})
	srv := &server{script: []step{{code: codes.Unavailable, hold: hold}}, entered: make(chan int, 4)}
	u, _ := interceptors(t, noWaits(t, 5), nil)
	client, _ := start(t, srv, u, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-srv.entered; cancel() }()
	_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{})
	if status.Code(err) != codes.Canceled {
		t.Errorf("err %v, want CANCELED", err)
	}
	if got := srv.count(); got != 1 {
		t.Errorf("the server saw %d attempts, want 1", got)
	}
}

// TestStreamCommit: a stream is retried until the client has the
// response's headers, never after.
func TestStreamCommit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script []step
		want   codes.Code
		served int
	}{
		{"a failure before the headers is retried", fails(codes.Unavailable, 1), codes.OK, 2},
		{"a failure after the headers is not", []step{{code: codes.Unavailable, header: true}}, codes.Unavailable, 1},
		{"a code not retryable is not", fails(codes.Internal, 1), codes.Internal, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &server{script: tc.script}
			_, s := interceptors(t, noWaits(t, 3), nil)
			client, _ := start(t, srv, nil, s)
			stream, err := client.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = stream.Recv()
			if got := status.Code(err); got != tc.want {
				t.Errorf("code %v, want %v (%v)", got, tc.want, err)
			}
			if tc.want == codes.OK {
				if _, err := stream.Recv(); err != io.EOF {
					t.Errorf("second Recv: %v, want io.EOF", err)
				}
			}
			if got := srv.count(); got != tc.served {
				t.Errorf("the server saw %d attempts, want %d", got, tc.served)
			}
		})
	}
}

// TestStreamReplay: a client stream's messages are sent again on a new
// attempt while they fit in MaxReplayBytes; past it the stream is
// committed and not retried.
func TestStreamReplay(t *testing.T) {
	msg := func(n int) *testpb.StreamingInputCallRequest {
		return &testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: make([]byte, n)}}
	}
	t.Run("replayed", func(t *testing.T) {
		srv := &server{script: []step{{code: codes.Unavailable, recv: 2}}}
		_, s := interceptors(t, noWaits(t, 3), nil)
		client, _ := start(t, srv, nil, s)
		stream, err := client.StreamingInputCall(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := stream.Send(msg(10)); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := stream.CloseAndRecv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetAggregatedPayloadSize() != 30 || srv.count() != 2 || srv.received[1] != 3 {
			t.Errorf("size %d, %d attempts, attempt 1 read %v messages: want 30, 2, 3", resp.GetAggregatedPayloadSize(), srv.count(), srv.received)
		}
	})
	t.Run("past the bound", func(t *testing.T) {
		srv := &server{script: []step{{code: codes.Unavailable, recv: 2}}}
		_, s := interceptors(t, noWaits(t, 3), &retrygrpc.Options{MaxReplayBytes: 25})
		client, _ := start(t, srv, nil, s)
		stream, err := client.StreamingInputCall(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := stream.Send(msg(10)); err != nil && err != io.EOF {
				t.Fatal(err)
			}
		}
		_, err = stream.CloseAndRecv()
		if status.Code(err) != codes.Unavailable || srv.count() != 1 {
			t.Errorf("err %v after %d attempts: want UNAVAILABLE after 1", err, srv.count())
		}
	})
	t.Run("bidi", func(t *testing.T) {
		srv := &server{script: []step{{code: codes.Unavailable, recv: 1}}}
		_, s := interceptors(t, noWaits(t, 3), nil)
		client, _ := start(t, srv, nil, s)
		stream, err := client.FullDuplexCall(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := stream.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte("x")}}); err != nil {
				t.Fatal(err)
			}
		}
		stream.CloseSend()
		got := 0
		for {
			_, err := stream.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got++
		}
		if got != 2 || srv.count() != 2 {
			t.Errorf("%d echoes after %d attempts, want 2 after 2", got, srv.count())
		}
	})
}
