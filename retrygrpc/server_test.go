package retrygrpc_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/steadfast-go/retry/retrygrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// step scripts one attempt of the test server; the zero step succeeds.
type step struct {
	code     codes.Code
	pushback []string      // values of grpc-retry-pushback-ms
	header   bool          // send the headers before failing
	hold     chan struct{} // wait for it (or the attempt's end) before answering
	recv     int           // streaming input: read this many messages before failing
}

// server is a TestService whose attempts follow a script, counted by
// the server itself.
type server struct {
	testpb.UnimplementedTestServiceServer

	mu        sync.Mutex
	script    []step
	attempts  int
	md        []metadata.MD // incoming metadata, per attempt
	received  []int         // messages read, per streaming attempt
	cancelled []bool        // the attempt's context ended before it answered
	entered   chan int      // each attempt's number, when it starts (if set)
	gone      chan int      // each held attempt whose context ended (if set)
	failEvery int           // with no script: attempts n%failEvery == failEvery-1 fail UNAVAILABLE
	byHeader  bool          // number attempts by grpc-previous-rpc-attempts, not arrival
}

// begin records an attempt and returns its number and step: in the
// order of arrival, or with byHeader the client's own number, from
// grpc-previous-rpc-attempts (hedged attempts may arrive out of order).
func (s *server) begin(ctx context.Context) (int, step) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	n := s.attempts
	s.attempts++
	if s.byHeader {
		n = 0
		if v := md.Get(retrygrpc.PreviousAttemptsHeader); len(v) > 0 {
			n, _ = strconv.Atoi(v[len(v)-1])
		}
	}
	for len(s.md) <= n {
		s.md = append(s.md, nil)
		s.received = append(s.received, 0)
		s.cancelled = append(s.cancelled, false)
	}
	s.md[n] = md
	var st step
	if n < len(s.script) {
		st = s.script[n]
	} else if s.failEvery > 0 && n%s.failEvery == s.failEvery-1 {
		st.code = codes.Unavailable
	}
	entered := s.entered
	s.mu.Unlock()
	if entered != nil {
		entered <- n
	}
	return n, st
}

// wait holds the attempt as its step says; false: its context ended.
func (s *server) wait(ctx context.Context, n int, st step) bool {
	if st.hold == nil {
		return true
	}
	select {
	case <-st.hold:
		return true
	case <-ctx.Done():
		s.mu.Lock()
		s.cancelled[n] = true
		gone := s.gone
		s.mu.Unlock()
		if gone != nil {
			gone <- n
		}
		return false
	}
}

func (s *server) fail(ctx context.Context, st step) error {
	if len(st.pushback) > 0 {
		grpc.SetTrailer(ctx, metadata.MD{retrygrpc.PushbackTrailer: st.pushback})
	}
	return status.Error(st.code, "scripted failure")
}

// unavailable counts the attempts that failed with UNAVAILABLE.
func (s *server) unavailable() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i := range s.attempts {
		if i < len(s.script) && s.script[i].code == codes.Unavailable ||
			i >= len(s.script) && s.failEvery > 0 && i%s.failEvery == s.failEvery-1 {
			n++
		}
	}
	return n
}

func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

func (s *server) incoming(n int, key string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.md[n].Get(key)
}

func (s *server) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	n, st := s.begin(ctx)
	if !s.wait(ctx, n, st) {
		return nil, status.Error(codes.Canceled, "gone")
	}
	if st.code != codes.OK {
		return nil, s.fail(ctx, st)
	}
	return &testpb.SimpleResponse{ServerId: strconv.Itoa(n)}, nil
}

func (s *server) EmptyCall(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	n, st := s.begin(ctx)
	if !s.wait(ctx, n, st) {
		return nil, status.Error(codes.Canceled, "gone")
	}
	if st.code != codes.OK {
		return nil, s.fail(ctx, st)
	}
	return &testpb.Empty{}, nil
}

func (s *server) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
	ctx := stream.Context()
	n, st := s.begin(ctx)
	if st.header {
		stream.SendHeader(metadata.Pairs("attempt", strconv.Itoa(n)))
	}
	if !s.wait(ctx, n, st) {
		return status.Error(codes.Canceled, "gone")
	}
	if st.code != codes.OK {
		return s.fail(ctx, st)
	}
	return stream.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: []byte(strconv.Itoa(n))}})
}

func (s *server) StreamingInputCall(stream grpc.ClientStreamingServer[testpb.StreamingInputCallRequest, testpb.StreamingInputCallResponse]) error {
	ctx := stream.Context()
	n, st := s.begin(ctx)
	total := 0
	for i := 0; st.code == codes.OK || i < st.recv; i++ {
		m, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		total += len(m.GetPayload().GetBody())
		s.mu.Lock()
		s.received[n]++
		s.mu.Unlock()
	}
	if st.header {
		stream.SendHeader(metadata.Pairs("attempt", strconv.Itoa(n)))
	}
	if st.code != codes.OK {
		return s.fail(ctx, st)
	}
	return stream.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: int32(total)})
}

func (s *server) FullDuplexCall(stream grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
	ctx := stream.Context()
	n, st := s.begin(ctx)
	if st.header {
		stream.SendHeader(metadata.Pairs("attempt", strconv.Itoa(n)))
	}
	for i := 0; st.code == codes.OK || i < st.recv; i++ {
		m, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.received[n]++
		s.mu.Unlock()
		if st.code == codes.OK {
			if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: m.GetPayload()}); err != nil {
				return err
			}
		}
	}
	return s.fail(ctx, st)
}

// start serves srv (a *server, or any TestService) on 127.0.0.1 over TCP
// and returns a client whose ClientConn has the interceptors, and
// grpc-go's retries off unless dial says otherwise.
func start(t testing.TB, srv testpb.TestServiceServer, unary grpc.UnaryClientInterceptor, stream grpc.StreamClientInterceptor, dial ...grpc.DialOption) (testpb.TestServiceClient, *grpc.ClientConn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	testpb.RegisterTestServiceServer(gs, srv)
	done := make(chan struct{})
	go func() { defer close(done); gs.Serve(lis) }()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if len(dial) == 0 {
		opts = append(opts, grpc.WithDisableRetry())
	}
	opts = append(opts, dial...)
	if unary != nil {
		opts = append(opts, grpc.WithChainUnaryInterceptor(unary))
	}
	if stream != nil {
		opts = append(opts, grpc.WithChainStreamInterceptor(stream))
	}
	cc, err := grpc.NewClient(lis.Addr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		gs.Stop()
		<-done
	})
	return testpb.NewTestServiceClient(cc), cc
}
