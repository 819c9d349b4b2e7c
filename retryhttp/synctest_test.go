package retryhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/retryhttp"
)

// handlerTransport serves requests in process with h: no socket, so it
// works inside a synctest bubble, where a real socket would stop the fake
// clock (a goroutine blocked on network I/O is not durably blocked).
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// TestUnderSynctestWithAnInProcessTransport is docs/http.md's second recipe
// for testing an HTTP caller: real waits of the real clock, made instant
// and exact by the bubble's fake time.
func TestUnderSynctestWithAnInProcessTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if calls++; calls < 3 {
				w.Header().Set("Retry-After", "20")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			io.WriteString(w, "done")
		})
		r, err := retry.New(retry.WithMaxAttempts(3))
		require.NoError(t, err)
		tr, err := retryhttp.NewTransport(r, &retryhttp.Options{Base: handlerTransport{h}})
		require.NoError(t, err)
		c := &http.Client{Transport: tr}

		start := time.Now()
		resp, err := c.Get("http://api.test/items")
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, 40*time.Second, time.Since(start), "two waits of Retry-After: 20, exactly")
		assert.Equal(t, 3, retryhttp.Attempts(resp))
	})
}

// downStore is an idempotency store that cannot record an outcome.
type downStore struct{ *memstore.Store }

func (downStore) Complete(context.Context, string, string, retry.StoredOutcome, time.Duration) error {
	return errors.New("store down")
}

// TestOutcomeNotRecordedClosesTheResponse: a request that succeeded but
// whose outcome the idempotency store could not record gives the error
// that says so, and the response it does not return is closed, so its
// connection is not leaked. In a bubble: recording is retried for a lease.
func TestOutcomeNotRecordedClosesTheResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := &closeCounter{Reader: strings.NewReader("created")}
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: body, Request: r}, nil
		})
		r, err := retry.New(retry.WithIdempotency(downStore{memstore.New(nil)}, &retry.IdempotencyOptions{Lease: time.Second}))
		require.NoError(t, err)
		tr, err := retryhttp.NewTransport(r, &retryhttp.Options{Base: base})
		require.NoError(t, err)
		req := newRequest(t, context.Background(), http.MethodPost, "http://api.test/orders", strings.NewReader("pay"))
		req.Header.Set(retryhttp.IdempotencyKeyHeader, "order-17")

		resp, err := tr.RoundTrip(req)
		require.ErrorIs(t, err, retry.ErrOutcomeNotRecorded)
		assert.Nil(t, resp)
		assert.Equal(t, int32(1), body.closed.Load(), "the response's body is closed")
	})
}
