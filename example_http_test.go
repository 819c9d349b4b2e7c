package retry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
)

// getStatus is the HTTP caller under test: a 503 is retried after the
// server's Retry-After, any other status ends the call.
func getStatus(ctx context.Context, r *retry.Retrier, client *http.Client, url string, now func() time.Time) (int, error) {
	return retry.DoValueWith(ctx, r, func(ctx context.Context) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, retry.Permanent(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body) // drained, so the connection is reused
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			err := fmt.Errorf("status %d", resp.StatusCode)
			if d, ok := retry.ParseRetryAfter(resp.Header.Get("Retry-After"), now()); ok {
				return 0, retry.RetryAfter(err, d)
			}
			return 0, err
		}
		return resp.StatusCode, nil
	})
}

// Testing an HTTP caller against a real server: the server runs on real
// sockets, so time is a mock clock, advanced each time Do has armed its
// timer. (A real socket inside a testing/synctest bubble would stop the
// bubble's fake time from advancing; see TestHTTPCallerUnderSynctest for
// the in-process alternative.)
func Example_httpServer() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if hits.Add(1) <= 2 {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()

	mock := clock.NewMock()
	armed := make(chan time.Duration)
	r, _ := retry.New(retry.WithClock(mock), retry.WithMaxAttempts(5),
		retry.WithWaitArmed(func(d time.Duration) { armed <- d }))

	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		status, err := getStatus(context.Background(), r, srv.Client(), srv.URL, mock.Now)
		done <- result{status, err}
	}()
	for {
		select {
		case d := <-armed:
			fmt.Println("waiting", d)
			mock.Add(d)
			continue
		case res := <-done:
			fmt.Println(res.status, res.err, hits.Load(), "requests")
		}
		break
	}
	// Output:
	// waiting 30s
	// waiting 30s
	// 200 <nil> 3 requests
}

// roundTripFunc serves requests in process, with no socket, so that it
// can run inside a testing/synctest bubble.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestHTTPCallerUnderSynctest tests the same caller in a synctest bubble:
// no mock clock and no WithWaitArmed, because the bubble's clock jumps as
// soon as every goroutine in it is blocked. This works only with an
// in-process transport: a real socket (an httptest.Server, or a client's
// kept-alive connection) is not "durably blocked", so fake time would stop
// and the test would hang until -timeout.
func TestHTTPCallerUnderSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hits := 0
		client := &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			hits++
			resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}
			if hits <= 2 {
				resp.StatusCode = http.StatusServiceUnavailable
				resp.Header.Set("Retry-After", "30")
			}
			return resp, nil
		})}
		r, err := retry.New(retry.WithMaxAttempts(5))
		require.NoError(t, err)
		start := time.Now()
		status, err := getStatus(context.Background(), r, client, "http://payments.test/charge", time.Now)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, status)
		assert.Equal(t, 3, hits)
		assert.Equal(t, time.Minute, time.Since(start), "two waits of the server's 30s, in fake time")
	})
}
