package retrygrpc_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrytest"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// TestStreamDeadline: a stream's retries end at once, with the last
// status, when the next wait cannot end before the deadline.
func TestStreamDeadline(t *testing.T) {
	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithBackoff(retry.Constant(time.Hour)),
		retry.WithJitter(retry.NoJitter)) // full jitter would wait under the minute once in 60 runs
	if err != nil {
		t.Fatal(err)
	}
	srv := &server{script: fails(codes.Unavailable, 1)}
	_, s := interceptors(t, r, nil)
	client, _ := start(t, srv, nil, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	stream, err := client.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("returned after %v", took)
	}
	if status.Code(err) != codes.Unavailable || !errors.Is(err, context.DeadlineExceeded) || srv.count() != 1 {
		t.Errorf("err %v after %d attempts: want UNAVAILABLE matching DeadlineExceeded after 1", err, srv.count())
	}
}

// TestStreamAttemptTimeout: the Retrier's attempt timeout cuts an attempt
// that is not committed, which is retried, and not a committed stream,
// which lives on after its attempt has returned.
func TestStreamAttemptTimeout(t *testing.T) {
	newRetrier := func(clk *retrytest.Clock) *retry.Retrier {
		r, err := retry.New(retry.WithClock(clk), retry.WithAttemptTimeout(time.Second),
			retry.WithBackoff(retry.Constant(0)), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	t.Run("before the headers", func(t *testing.T) {
		clk := retrytest.NewClock()
		srv := &server{script: []step{{hold: make(chan struct{})}}, entered: make(chan int, 2), gone: make(chan int, 1)}
		_, s := interceptors(t, newRetrier(clk), nil)
		client, _ := start(t, srv, nil, s)
		go func() {
			received(t, srv.entered, "attempt 0")
			clk.Add(time.Second) // the attempt timeout
			select {
			case d := <-clk.Armed(): // the wait before attempt 1
				clk.Add(d)
			case <-time.After(10 * time.Second):
				t.Error("no wait armed after the attempt timed out")
			}
		}()
		stream, err := client.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
		received(t, srv.gone, "the end of attempt 0")
		if got := srv.count(); got != 2 {
			t.Errorf("the server saw %d attempts, want 2", got)
		}
	})
	t.Run("after the headers", func(t *testing.T) {
		clk := retrytest.NewClock()
		hold := make(chan struct{})
		srv := &server{script: []step{{header: true, hold: hold}}}
		_, s := interceptors(t, newRetrier(clk), nil)
		client, _ := start(t, srv, nil, s)
		stream, err := client.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Header(); err != nil { // committed
			t.Fatal(err)
		}
		clk.Add(time.Hour)
		close(hold)
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("a committed stream was cut: %v", err)
		}
		if _, err := stream.Recv(); err != io.EOF || srv.count() != 1 {
			t.Errorf("%v after %d attempts, want io.EOF after 1", err, srv.count())
		}
	})
}

// TestStreamSendDuringRetry: a message sent while the Retrier waits to
// retry (its attempt has ended) is sent again on the next attempt with
// those before it, and SendMsg returns nil.
func TestStreamSendDuringRetry(t *testing.T) {
	clk := retrytest.NewClock()
	r, err := retry.New(retry.WithClock(clk), retry.WithBackoff(retry.Constant(time.Second)), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
	if err != nil {
		t.Fatal(err)
	}
	srv := &server{script: []step{{code: codes.Unavailable, recv: 1}}}
	_, s := interceptors(t, r, nil)
	client, _ := start(t, srv, nil, s)
	stream, err := client.StreamingInputCall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	msg := &testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: []byte("abc")}}
	if err := stream.Send(msg); err != nil {
		t.Fatal(err)
	}
	d := <-clk.Armed() // attempt 0 failed; the Retrier waits
	sent := make(chan error, 1)
	go func() { sent <- stream.Send(msg) }()
	clk.Add(d)
	if err := <-sent; err != nil {
		t.Fatalf("Send during the retry: %v", err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetAggregatedPayloadSize() != 6 || srv.count() != 2 || srv.received[1] != 2 {
		t.Errorf("size %d after %d attempts, read %v: want 6 after 2, attempt 1 reading both", resp.GetAggregatedPayloadSize(), srv.count(), srv.received)
	}
}
