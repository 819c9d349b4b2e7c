package benchmarks

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	grpcretry "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrygrpc"
)

// The gRPC benchmarks of issue #25: a unary call of grpc-go's own test
// service (grpc.testing.TestService/UnaryCall) on a real server on
// 127.0.0.1 over TCP, one server and one ClientConn per setup, through
// each way of retrying it. Allocation counts include the in-process
// server's, the same for every setup.

// grpcAttempts is every retrying setup's limit: 4 attempts in all.
const grpcAttempts = 4

// grpcSetup returns the dial options of one way of calling: wait is the
// backoff between attempts (0 in the benchmarks, 1 s under a deadline),
// and failing says the call is expected to fail, so our Retrier goes
// without a retry budget (the other setups have none, and New's default
// one would soon refuse the retries of a server that fails on purpose);
// on a first-try success it keeps New's default budget, what a user pays.
type grpcSetup struct {
	name    string
	retries bool // makes up to grpcAttempts attempts
	dial    func(tb testing.TB, wait time.Duration, failing bool) []grpc.DialOption
}

var grpcSetups = []grpcSetup{
	{"NoInterceptor", false, func(testing.TB, time.Duration, bool) []grpc.DialOption {
		return nil
	}},
	{"HandLoop", true, func(testing.TB, time.Duration, bool) []grpc.DialOption {
		return []grpc.DialOption{grpc.WithUnaryInterceptor(grpcHandLoop)}
	}},
	{"Steadfast", true, func(tb testing.TB, wait time.Duration, failing bool) []grpc.DialOption {
		opts := []retry.Option{retry.WithMaxAttempts(grpcAttempts),
			retry.WithBackoff(retry.Constant(wait)), retry.WithJitter(retry.NoJitter)}
		if failing {
			opts = append(opts, retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		}
		r, err := retry.New(opts...)
		require.NoError(tb, err)
		ic, err := retrygrpc.UnaryClientInterceptor(r, nil) // nil: UNAVAILABLE is retried
		require.NoError(tb, err)
		return []grpc.DialOption{grpc.WithUnaryInterceptor(ic)}
	}},
	{"GRPCMiddleware", true, func(_ testing.TB, wait time.Duration, _ bool) []grpc.DialOption {
		// WithMax is the number of attempts in all, despite its doc
		// ("retries"): its loop runs attempt 0 to max-1.
		return []grpc.DialOption{grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(
			grpcretry.WithMax(grpcAttempts),
			grpcretry.WithCodes(codes.Unavailable),
			grpcretry.WithBackoff(grpcretry.BackoffLinear(wait))))}
	}},
	{"GRPCBuiltin", true, func(_ testing.TB, wait time.Duration, _ bool) []grpc.DialOption {
		// grpc-go refuses a retryPolicy whose initialBackoff is not > 0:
		// 1 ns ("0.000000001s", the smallest a JSON duration can say)
		// stands for zero. Its waits are jittered by 0.8 to 1.2.
		backoff := max(wait, time.Nanosecond)
		return []grpc.DialOption{grpc.WithDefaultServiceConfig(fmt.Sprintf(`{"methodConfig": [{
			"name": [{"service": "grpc.testing.TestService"}],
			"retryPolicy": {"maxAttempts": %d, "initialBackoff": %q, "maxBackoff": %q,
				"backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`,
			grpcAttempts, jsonDuration(backoff), jsonDuration(backoff)))}
	}},
}

// jsonDuration writes d as a service config's JSON duration.
func jsonDuration(d time.Duration) string {
	return fmt.Sprintf("%d.%09ds", d/time.Second, d%time.Second)
}

// grpcHandLoop is the floor: it invokes the call up to grpcAttempts times
// while the status is UNAVAILABLE, with nothing else (no wait, no
// metadata, no budget).
func grpcHandLoop(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	for i := 1; ; i++ {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if i == grpcAttempts || status.Code(err) != codes.Unavailable {
			return err
		}
	}
}

var errGRPCUnavailable = status.Error(codes.Unavailable, "try again")

// grpcServer answers UnaryCall: of every failFirst+1 calls it receives,
// the first failFirst fail with UNAVAILABLE and the next succeeds; a
// negative failFirst fails them all.
type grpcServer struct {
	testgrpc.UnimplementedTestServiceServer
	failFirst int
	calls     atomic.Int64
}

func (s *grpcServer) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	n := s.calls.Add(1) - 1
	if s.failFirst < 0 || int(n%int64(s.failFirst+1)) < s.failFirst {
		return nil, errGRPCUnavailable
	}
	return &testgrpc.SimpleResponse{}, nil
}

// startGRPC starts a server with the failure pattern failFirst on a
// loopback port and returns a client connected to it through the dial
// options, once the connection is open.
func startGRPC(tb testing.TB, failFirst int, opts []grpc.DialOption) (testgrpc.TestServiceClient, *grpcServer) {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	srv := grpc.NewServer()
	s := &grpcServer{failFirst: failFirst}
	testgrpc.RegisterTestServiceServer(srv, s)
	go srv.Serve(lis)
	tb.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(),
		append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	require.NoError(tb, err)
	tb.Cleanup(func() { cc.Close() })
	c := testgrpc.NewTestServiceClient(cc)
	// Open the connection before the first call that counts.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc.Connect()
	for st := cc.GetState(); st != connectivity.Ready; st = cc.GetState() {
		if !cc.WaitForStateChange(ctx, st) {
			tb.Fatalf("connecting to %s: %v", lis.Addr(), ctx.Err())
		}
	}
	if failFirst >= 0 {
		// One call warms the path up (a server that always fails would
		// make the retrying setups wait); it ends a cycle of the pattern.
		c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		s.calls.Store(0)
	}
	return c, s
}

func runGRPC(b *testing.B, s grpcSetup, failFirst int) {
	c, _ := startGRPC(b, failFirst, s.dial(b, 0, failFirst > 0))
	ctx, req := context.Background(), &testgrpc.SimpleRequest{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.UnaryCall(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGRPCFirstTry is a unary call on loopback answered OK at once.
func BenchmarkGRPCFirstTry(b *testing.B) {
	for _, s := range grpcSetups {
		b.Run(s.name, func(b *testing.B) { runGRPC(b, s, 0) })
	}
}

// BenchmarkGRPCThreeUnavailable is a unary call answered UNAVAILABLE three
// times, then OK, with zero waits, through each setup that makes 4
// attempts.
func BenchmarkGRPCThreeUnavailable(b *testing.B) {
	for _, s := range grpcSetups {
		if s.retries {
			b.Run(s.name, func(b *testing.B) { runGRPC(b, s, 3) })
		}
	}
}

// runGRPCInterleaved calls through every setup of setups in turn in each
// iteration (rotating which goes first), so that all meet the same load
// on a shared machine, and reports each one's ns per call and the ratio
// of ours to base's. Allocations are the non-interleaved benchmarks'.
func runGRPCInterleaved(b *testing.B, setups []grpcSetup, failFirst int, base string) {
	type lane struct {
		c testgrpc.TestServiceClient
		t time.Duration
	}
	lanes := make([]*lane, len(setups))
	ours, floor := -1, -1
	for i, s := range setups {
		c, _ := startGRPC(b, failFirst, s.dial(b, 0, failFirst > 0))
		lanes[i] = &lane{c: c}
		switch s.name {
		case "Steadfast":
			ours = i
		case base:
			floor = i
		}
	}
	ctx, req := context.Background(), &testgrpc.SimpleRequest{}
	n := 0
	for b.Loop() {
		for j := range lanes {
			l := lanes[(n+j)%len(lanes)]
			start := time.Now()
			if _, err := l.c.UnaryCall(ctx, req); err != nil {
				b.Fatal(err)
			}
			l.t += time.Since(start)
		}
		n++
	}
	for i, s := range setups {
		b.ReportMetric(float64(lanes[i].t.Nanoseconds())/float64(n), s.name+"-ns/call")
	}
	b.ReportMetric(float64(lanes[ours].t)/float64(lanes[floor].t), "Steadfast/"+base)
}

// BenchmarkGRPCFirstTryInterleaved is BenchmarkGRPCFirstTry with the
// setups in turn in every iteration; it reports ours ÷ no interceptor.
func BenchmarkGRPCFirstTryInterleaved(b *testing.B) {
	runGRPCInterleaved(b, grpcSetups, 0, "NoInterceptor")
}

// BenchmarkGRPCThreeUnavailableInterleaved is BenchmarkGRPCThreeUnavailable
// with the setups in turn in every iteration; it reports ours ÷ the hand
// loop.
func BenchmarkGRPCThreeUnavailableInterleaved(b *testing.B) {
	var setups []grpcSetup
	for _, s := range grpcSetups {
		if s.retries {
			setups = append(setups, s)
		}
	}
	runGRPCInterleaved(b, setups, 3, "HandLoop")
}

// grpcDeadline and grpcDeadlineWait are the deadline scenario: a call
// with 250 ms left, a backoff of 1 s, a server that always answers
// UNAVAILABLE.
const (
	grpcDeadline     = 250 * time.Millisecond
	grpcDeadlineWait = time.Second
)

// callUnderDeadline makes one call under grpcDeadline and returns how
// long it took to return, how many attempts the server saw, and its error.
func callUnderDeadline(c testgrpc.TestServiceClient, s *grpcServer) (time.Duration, int64, error) {
	before := s.calls.Load()
	ctx, cancel := context.WithTimeout(context.Background(), grpcDeadline)
	defer cancel()
	start := time.Now()
	_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	return time.Since(start), s.calls.Load() - before, err
}

// BenchmarkGRPCDeadline measures, in real time, what each setup does with
// a call that has 250 ms left, a backoff of 1 s and a server that always
// answers UNAVAILABLE: ns/op is the time to return, attempts/op the
// attempts the server saw, code the status code returned (14
// UNAVAILABLE, 4 DEADLINE_EXCEEDED). The setups that wait take the whole
// 250 ms per call: run it with -benchtime 1x for one call per setup.
func BenchmarkGRPCDeadline(b *testing.B) {
	for _, s := range grpcSetups {
		b.Run(s.name, func(b *testing.B) {
			c, srv := startGRPC(b, -1, s.dial(b, grpcDeadlineWait, true))
			var attempts int64
			var last error
			for b.Loop() {
				_, n, err := callUnderDeadline(c, srv)
				attempts += n
				last = err
			}
			b.ReportMetric(float64(attempts)/float64(b.N), "attempts/op")
			b.ReportMetric(float64(status.Code(last)), "code")
			b.Logf("%s returned %v", s.name, last)
		})
	}
}

// TestGRPCSetups_doWhatTheBenchmarksSay checks that every setup makes one
// attempt for a call answered OK, and that every retrying setup makes 4
// for UNAVAILABLE three times then OK and returns the OK, each call on
// its own ClientConn's one server.
func TestGRPCSetups_doWhatTheBenchmarksSay(t *testing.T) {
	for _, s := range grpcSetups {
		for failFirst, want := range map[int]int64{0: 1, 3: 4} {
			if failFirst > 0 && !s.retries {
				continue
			}
			c, srv := startGRPC(t, failFirst, s.dial(t, 0, failFirst > 0))
			for range 3 {
				before := srv.calls.Load()
				_, err := c.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
				require.NoError(t, err, "%s, %d failures", s.name, failFirst)
				assert.Equal(t, want, srv.calls.Load()-before, "%s, %d failures", s.name, failFirst)
			}
		}
	}
}

// TestGRPCDeadline_oursReturnsAtOnce checks ours in the deadline scenario
// of BenchmarkGRPCDeadline, which it alone can run in a test: a wait of
// 1 s cannot fit in the 250 ms left, so after one attempt the call returns
// the server's UNAVAILABLE at once, without waiting for the deadline.
func TestGRPCDeadline_oursReturnsAtOnce(t *testing.T) {
	for _, s := range grpcSetups {
		if s.name != "Steadfast" {
			continue
		}
		c, srv := startGRPC(t, -1, s.dial(t, grpcDeadlineWait, true))
		took, attempts, err := callUnderDeadline(c, srv)
		assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
		assert.ErrorContains(t, err, "try again", "the server's status, in the error")
		assert.Equal(t, int64(1), attempts)
		assert.Less(t, took, grpcDeadline/2, "returned at once, not at the deadline")
	}
}
