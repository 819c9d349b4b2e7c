package retryhttp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The body of a returned 503, read ahead up to DrainLimit, may be closed
// from another goroutine to abort a read, as net/http's bodies may; run
// with -race.
func TestHeldBodyConcurrentClose(t *testing.T) {
	release := make(chan struct{})
	e := newEnv(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, strings.Repeat("e", 70<<10)) // past DrainLimit
		w.(http.Flusher).Flush()
		select { // then stall, so that only Close ends the read
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	c := e.client(fast(t, 1), nil)
	resp, err := c.Do(newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	buf := make([]byte, 70<<10)
	n, err := io.ReadFull(resp.Body, buf) // all that was sent, then blocks
	require.NoError(t, err)
	assert.Equal(t, 70<<10, n)

	done := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(buf) // blocks: the server stalls
		done <- err
	}()
	go func() { resp.Body.Close() }() // concurrently with the read
	assert.Error(t, <-done, "the read ends with the Close")
	assert.NoError(t, resp.Body.Close())
	_, err = resp.Body.Read(buf)
	assert.Error(t, err, "read after Close")
}
