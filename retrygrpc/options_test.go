package retrygrpc_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrygrpc"
	"github.com/steadfast-go/retry/retrystats"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
)

// TestInvalidOptions: each bad option is an error wrapping
// retry.ErrInvalidOption that names the problem, from both constructors.
func TestInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		opts retrygrpc.Options
		want string
	}{
		{retrygrpc.Options{MaxReplayBytes: -2}, "MaxReplayBytes"},
		{retrygrpc.Options{IdempotencyKeyHeader: "Idempotency-Key"}, "IdempotencyKeyHeader"},
		{retrygrpc.Options{IdempotencyKeyHeader: "grpc-key"}, "IdempotencyKeyHeader"},
		{retrygrpc.Options{IdempotencyKeyHeader: "key-bin"}, "IdempotencyKeyHeader"},
		{retrygrpc.Options{Methods: map[string]retrygrpc.Policy{"/pkg.Service": {}}}, "full method name"},
		{retrygrpc.Options{Methods: map[string]retrygrpc.Policy{"pkg.Service/Method": {}}}, "neither a service"},
		{retrygrpc.Options{Methods: map[string]retrygrpc.Policy{"": {RetryableCodes: []codes.Code{codes.OK}}}}, "RetryableCodes"},
		{retrygrpc.Options{Methods: map[string]retrygrpc.Policy{"": {IdempotentRetryable: []codes.Code{99}}}}, "IdempotentRetryable"},
	} {
		_, err1 := retrygrpc.UnaryClientInterceptor(nil, &tc.opts)
		_, err2 := retrygrpc.StreamClientInterceptor(nil, &tc.opts)
		for _, err := range []error{err1, err2} {
			if !errors.Is(err, retry.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%+v: %v, want ErrInvalidOption naming %s", tc.opts, err, tc.want)
			}
		}
	}
	if _, err := retrygrpc.UnaryClientInterceptor(nil, &retrygrpc.Options{MaxReplayBytes: retrygrpc.NoReplay, IdempotencyKeyHeader: "x-key.v1_a"}); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

// TestAllocs guards the hot path: a first-try success through the unary
// interceptor allocates nothing of its own (generated code's CallOptions,
// which the interceptor keeps for its attempts, are the caller's).
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	invoker := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		return nil
	}
	r, err := retry.New()
	if err != nil {
		t.Fatal(err)
	}
	withStats, err := retry.New(retry.WithObserver(new(retrystats.Stats)))
	if err != nil {
		t.Fatal(err)
	}
	req, reply := &testpb.SimpleRequest{}, &testpb.SimpleResponse{}
	ctx := context.Background()
	for name, r := range map[string]*retry.Retrier{"New()": r, "zero Retrier": nil, "with Stats": withStats} {
		u, err := retrygrpc.UnaryClientInterceptor(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		u(ctx, testpb.TestService_UnaryCall_FullMethodName, req, reply, nil, invoker)
		got := testing.AllocsPerRun(1000, func() {
			u(ctx, testpb.TestService_UnaryCall_FullMethodName, req, reply, nil, invoker)
		})
		if got != 0 {
			t.Errorf("%s: %v allocations per first-try call, want 0", name, got)
		}
	}
}
