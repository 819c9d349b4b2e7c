package retryhttp_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryhttp"
)

// The attempt timeout also bounds reading ahead a retryable status's body:
// a 503 whose headers come at once and whose body comes after the timeout
// is still that status (retried; the last one returned, not turned into
// "timed out before its response headers"), and its body, cut, reads as
// an error that says so.
func TestAttemptTimeoutCutsTheReadAheadButKeepsTheStatus(t *testing.T) {
	const timeout = 100 * time.Millisecond
	e := newEnv(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.(http.Flusher).Flush()
		select { // the body comes after the attempt timeout, if ever
		case <-time.After(2 * timeout):
			_, _ = io.WriteString(w, "busy")
		case <-r.Context().Done():
		}
	})
	obs := &recorder{}
	c := e.client(fast(t, 2, retry.WithAttemptTimeout(timeout), retry.WithObserver(obs)), nil)
	resp, err := c.Do(newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, 2, retryhttp.Attempts(resp))
	_, err = io.ReadAll(resp.Body)
	assert.ErrorContains(t, err, "timed out while its response's body was read ahead")
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, int64(2), e.requests.Load())
	assertEndsOnStatus(t, obs, 2)
}

// A 503 whose body never comes does not hold the call past its attempts'
// timeouts, also without a deadline on the request.
func TestStalledBodyOfARetryableStatusDoesNotHang(t *testing.T) {
	const timeout = 50 * time.Millisecond
	e := newEnv(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	c := e.client(fast(t, 2, retry.WithAttemptTimeout(timeout)), nil)
	done := make(chan error, 1)
	go func() {
		resp, err := c.Do(newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
		if err == nil {
			err = resp.Body.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second): // a safety net: the call takes about 2 × 50ms
		t.Fatal("the call hangs on a body that never comes")
	}
}
