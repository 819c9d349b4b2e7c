package retrygrpc_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrygrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// warmingUp answers UNAVAILABLE to its first call, then serves.
type warmingUp struct {
	testpb.UnimplementedTestServiceServer
	calls atomic.Int32
}

func (w *warmingUp) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	fmt.Printf("server: attempt %d, previous attempts %q\n", w.calls.Add(1), md.Get("grpc-previous-rpc-attempts"))
	if w.calls.Load() == 1 {
		return nil, status.Error(codes.Unavailable, "warming up")
	}
	return &testpb.SimpleResponse{ServerId: "inventory-1"}, nil
}

func ExampleUnaryClientInterceptor() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer()
	testpb.RegisterTestServiceServer(srv, new(warmingUp))
	go srv.Serve(lis)
	defer srv.Stop()

	// One Retrier, and so one retry budget, per target.
	r, err := retry.New(retry.WithName("inventory"), retry.WithBackoff(retry.Exponential(time.Millisecond, 2, time.Second)))
	if err != nil {
		panic(err)
	}
	unary, err := retrygrpc.UnaryClientInterceptor(r, nil)
	if err != nil {
		panic(err)
	}
	stream, err := retrygrpc.StreamClientInterceptor(r, nil)
	if err != nil {
		panic(err)
	}
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(), // the interceptors retry; grpc-go's own retries would multiply theirs
		grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream))
	if err != nil {
		panic(err)
	}
	defer cc.Close()

	resp, err := testpb.NewTestServiceClient(cc).UnaryCall(context.Background(), &testpb.SimpleRequest{})
	fmt.Println(resp.GetServerId(), err)
	// Output:
	// server: attempt 1, previous attempts []
	// server: attempt 2, previous attempts ["1"]
	// inventory-1 <nil>
}
