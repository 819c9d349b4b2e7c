package retrygrpc_test

import (
	"context"
	"errors"
	"testing"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// refuseAll is a Breaker that refuses every attempt.
type refuseAll struct{}

func (refuseAll) Allow() (func(error), error) { return nil, overload.ErrCircuitOpen }

// TestStatus_isTheServersAsGRPCGives checks that a call that gave up
// returns what grpc-go's own client returns, seen through the status
// package: the last attempt's status, its message and code untouched,
// while errors.As still finds the *retry.Error; a call that made no
// attempt gets the status grpc-go gives its reason.
func TestStatus_isTheServersAsGRPCGives(t *testing.T) {
	srv := &server{script: fails(codes.Unavailable, 5)}
	u, s := interceptors(t, noWaits(t, 3), nil)
	client, _ := start(t, srv, u, s)

	_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable || st.Message() != "scripted failure" {
		t.Fatalf("status.FromError = %v, %v: want the server's UNAVAILABLE \"scripted failure\"", st, ok)
	}
	var e *retry.Error
	if !errors.As(err, &e) || e.Attempts != 3 || e.Outcome != retry.OutcomeExhausted {
		t.Fatalf("errors.As(*retry.Error) = %+v: want 3 attempts, exhausted", e)
	}

	streams, _ := start(t, &server{script: fails(codes.Unavailable, 5)}, u, s)
	stream, err := streams.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || st.Message() != "scripted failure" {
		t.Fatalf("a stream's status = %v: want the server's UNAVAILABLE", st)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = client.UnaryCall(ctx, &testpb.SimpleRequest{})
	if st, _ := status.FromError(err); st.Code() != codes.Canceled {
		t.Fatalf("a call cancelled before its first attempt: %v, want CANCELED as grpc-go gives", st)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v does not match context.Canceled", err)
	}

	ub, sb := interceptors(t, noWaits(t, 3, retry.WithOverload(&retry.OverloadOptions{Breaker: refuseAll{}})), nil)
	refused, _ := start(t, &server{}, ub, sb)
	_, err = refused.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable {
		t.Fatalf("a call an open breaker refused: %v, want UNAVAILABLE", st)
	}
	if !errors.Is(err, overload.ErrCircuitOpen) {
		t.Fatalf("%v does not match overload.ErrCircuitOpen", err)
	}
}
