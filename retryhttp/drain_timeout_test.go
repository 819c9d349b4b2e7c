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

// The attempt timeout bounds an attempt up to its response headers: a 503
// whose headers come at once and whose body comes after the timeout is a
// retryable status, retried, and the last one is returned with its whole
// body, not turned into "timed out before its response headers".
func TestAttemptTimeoutDoesNotCutA503Body(t *testing.T) {
	const timeout = 100 * time.Millisecond
	e := newEnv(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.(http.Flusher).Flush()
		time.Sleep(2 * timeout) // the body comes after the attempt timeout
		io.WriteString(w, "busy")
	})
	obs := &recorder{}
	c := e.client(fast(t, 2, retry.WithAttemptTimeout(timeout), retry.WithObserver(obs)))
	resp, body, err := do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "busy", body)
	assert.Equal(t, 2, retryhttp.Attempts(resp))
	assert.Equal(t, int64(2), e.requests.Load())
	obs.mu.Lock()
	defer obs.mu.Unlock()
	require.Len(t, obs.ends, 2)
	for _, end := range obs.ends {
		var se *retryhttp.StatusError
		assert.ErrorAs(t, end.Err, &se, "each attempt ended on its status, not a timeout")
	}
}
