package retryhttp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryhttp"
)

// onlyReader hides every method but Read, so http.NewRequest cannot set
// GetBody.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestEveryAttemptSendsTheSameBody(t *testing.T) {
	payload := strings.Repeat("payload ", 1000)
	for name, body := range map[string]func() io.Reader{
		"GetBody (bytes.Reader)": func() io.Reader { return bytes.NewReader([]byte(payload)) },
		"buffered (no GetBody)":  func() io.Reader { return onlyReader{strings.NewReader(payload)} },
		"buffered, unknown length": func() io.Reader {
			return io.MultiReader(strings.NewReader(payload[:10]), strings.NewReader(payload[10:]))
		},
		"buffered, exactly at the limit": func() io.Reader { return onlyReader{strings.NewReader(payload)} },
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, statuses(503, 502, 200))
			var opts *retryhttp.Options
			if strings.Contains(name, "exactly") {
				opts = &retryhttp.Options{BodyLimit: int64(len(payload))}
			}
			req := newRequest(t, context.Background(), http.MethodPut, e.srv.URL, body())
			if strings.Contains(name, "buffered") {
				require.Nil(t, req.GetBody)
			}
			resp, _, err := do(t, e.client(fast(t, 3), opts), req)
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, []string{payload, payload, payload}, e.seenBodies())
		})
	}
}

func TestBufferedBodyClosesTheCallersBody(t *testing.T) {
	e := newEnv(t, statuses(503, 200))
	body := &closeCounter{Reader: strings.NewReader("abc")}
	resp, _, err := do(t, e.client(fast(t, 3), nil), newRequest(t, context.Background(), http.MethodPut, e.srv.URL, body))
	require.NoError(t, err)
	assert.Equal(t, 2, retryhttp.Attempts(resp))
	assert.Equal(t, int32(1), body.closed.Load())
}

func TestBodyOverTheLimitIsSentOnceAndNotRetried(t *testing.T) {
	payload := strings.Repeat("x", 100)
	t.Run("a retryable status is the final response", func(t *testing.T) {
		e := newEnv(t, statuses(503, 200))
		for _, body := range []io.Reader{onlyReader{strings.NewReader(payload)}, io.LimitReader(strings.NewReader(payload), 100)} {
			e.requests.Store(0)
			req := newRequest(t, context.Background(), http.MethodPut, e.srv.URL, body)
			resp, _, err := do(t, e.client(fast(t, 3), &retryhttp.Options{BodyLimit: 99}), req)
			require.NoError(t, err)
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			assert.Equal(t, 1, retryhttp.Attempts(resp))
			assert.Equal(t, int64(1), e.requests.Load())
		}
		assert.Equal(t, []string{payload, payload}, e.seenBodies(), "the whole body went out, read-ahead bytes first")
	})
	t.Run("a failure says why it was not retried", func(t *testing.T) {
		e := newEnv(t, hangUp)
		req := newRequest(t, context.Background(), http.MethodPut, e.srv.URL, onlyReader{strings.NewReader(payload)})
		req.ContentLength = int64(len(payload)) // known: not even read ahead
		_, err := e.client(fast(t, 3), &retryhttp.Options{BodyLimit: 10}).Do(req)
		require.ErrorIs(t, err, retryhttp.ErrBodyNotReplayable)
		assert.ErrorIs(t, err, io.EOF, "the attempt's own error is kept")
		assert.Contains(t, err.Error(), "not retried: the request body is longer than the 10-byte body limit and the request has no GetBody")
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 1, re.Attempts)
	})
	t.Run("NoBodyCopy never copies", func(t *testing.T) {
		e := newEnv(t, statuses(503, 200))
		req := newRequest(t, context.Background(), http.MethodPut, e.srv.URL, onlyReader{strings.NewReader("a")})
		resp, _, err := do(t, e.client(fast(t, 3), &retryhttp.Options{BodyLimit: retryhttp.NoBodyCopy}), req)
		require.NoError(t, err)
		assert.Equal(t, 1, retryhttp.Attempts(resp))
		assert.Equal(t, []string{"a"}, e.seenBodies())
	})
}

func TestADeclaredContentLengthIsOnlyAHint(t *testing.T) {
	t.Run("math.MaxInt64 with a one-byte body does not panic", func(t *testing.T) {
		e := newEnv(t, statuses(503, 200))
		body := &closeCounter{Reader: strings.NewReader("x")}
		req := newRequest(t, context.Background(), http.MethodPut, e.srv.URL, body)
		req.ContentLength = math.MaxInt64
		c := e.client(fast(t, 3), &retryhttp.Options{BodyLimit: math.MaxInt64})
		var err error
		require.NotPanics(t, func() { _, err = c.Do(req) })
		require.ErrorContains(t, err, "retryhttp: the request's ContentLength is 9223372036854775807 but its body has 1 bytes; nothing was sent")
		assert.Equal(t, int64(0), e.requests.Load())
		assert.Equal(t, int32(1), body.closed.Load())
	})
	t.Run("a large declared length reserves no memory for a small body", func(t *testing.T) {
		e := newEnv(t, statuses(200))
		req := newRequest(t, context.Background(), http.MethodPut, e.srv.URL, onlyReader{strings.NewReader("x")})
		req.ContentLength = 64 << 20
		c := e.client(fast(t, 3), &retryhttp.Options{BodyLimit: 1 << 30})
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := c.Do(req)
		runtime.ReadMemStats(&after)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "bytes allocated for a one-byte body")
		assert.ErrorContains(t, err, "ContentLength is 67108864 but its body has 1 bytes")
	})
	for name, declared := range map[string]int64{"shorter": 5, "longer": 2} {
		t.Run("a body "+name+" than declared is not sent", func(t *testing.T) {
			e := newEnv(t, statuses(200))
			req := newRequest(t, context.Background(), http.MethodPut, e.srv.URL, onlyReader{strings.NewReader("abc")})
			req.ContentLength = declared
			_, err := e.client(fast(t, 3), nil).Do(req)
			require.ErrorContains(t, err, "ContentLength is "+strconv.FormatInt(declared, 10)+" but its body has 3 bytes")
			assert.Equal(t, int64(0), e.requests.Load())
		})
	}
	t.Run("a declared body past the preallocation is copied whole", func(t *testing.T) {
		payload := strings.Repeat("0123456789abcdef", 20<<10) // 320 KiB
		e := newEnv(t, statuses(503, 200))
		req := newRequest(t, context.Background(), http.MethodPut, e.srv.URL, onlyReader{strings.NewReader(payload)})
		req.ContentLength = int64(len(payload))
		resp, _, err := do(t, e.client(fast(t, 3), nil), req)
		require.NoError(t, err)
		assert.Equal(t, 2, retryhttp.Attempts(resp))
		assert.Equal(t, []string{payload, payload}, e.seenBodies())
	})
}

func TestGetBodyFailureStopsTheRequest(t *testing.T) {
	e := newEnv(t, statuses(503, 200))
	req := newRequest(t, context.Background(), http.MethodPut, e.srv.URL, strings.NewReader("x"))
	boom := errors.New("boom")
	req.GetBody = func() (io.ReadCloser, error) { return nil, boom }
	_, err := e.client(fast(t, 3), nil).Do(req)
	require.ErrorIs(t, err, boom)
	require.ErrorIs(t, err, retryhttp.ErrBodyNotReplayable)
	var se *retryhttp.StatusError
	assert.False(t, errors.As(err, &se), "the error is GetBody's")
	assert.Equal(t, int64(1), e.requests.Load())
}

// failingReader fails after its data.
type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

func TestRequestBodyReadErrorSendsNothing(t *testing.T) {
	e := newEnv(t, statuses(200))
	boom := errors.New("disk gone")
	body := &closeCounter{Reader: io.MultiReader(strings.NewReader("ab"), failingReader{boom})}
	_, err := e.client(fast(t, 3), nil).Do(newRequest(t, context.Background(), http.MethodPut, e.srv.URL, body))
	require.ErrorIs(t, err, boom)
	assert.Equal(t, int64(0), e.requests.Load())
	assert.Equal(t, int32(1), body.closed.Load(), "RoundTrip closes the body on errors too")
}

func TestIntermediateResponsesAreDrainedAndTheirConnectionReused(t *testing.T) {
	e := newEnv(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		io.WriteString(w, strings.Repeat("busy ", 2000)) // 10 kB: under DrainLimit
	})
	c := e.client(fast(t, 3), nil)
	for i := range 5 {
		e.requests.Store(0)
		resp, _, err := do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, 3, retryhttp.Attempts(resp))
		assert.Equal(t, int64(1), e.newConns.Load(), "request %d: 3 attempts each, one connection in all", i)
	}
}

func TestAnIntermediateBodyOverTheDrainLimitIsClosed(t *testing.T) {
	e := newEnv(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, strings.Repeat("x", 4*retryhttp.DrainLimit))
		}
	})
	resp, _, err := do(t, e.client(fast(t, 3), nil), newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, int64(2), e.newConns.Load(), "reading on would have been unbounded: that connection is dropped")
}

func TestExhaustedAttemptsReturnTheLastResponse(t *testing.T) {
	for name, size := range map[string]int{"small body": 10, "body over the drain limit": 3 * retryhttp.DrainLimit} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, func(n int, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("X-Attempt", strconv.Itoa(n))
				w.WriteHeader(http.StatusBadGateway)
				io.WriteString(w, strconv.Itoa(n)+strings.Repeat(".", size))
			})
			resp, body, err := do(t, e.client(fast(t, 3), nil), newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
			require.NoError(t, err, "as http.Client, any status is a response")
			assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
			assert.Equal(t, "3", resp.Header.Get("X-Attempt"))
			assert.Equal(t, "3"+strings.Repeat(".", size), body, "the body is whole")
			assert.Equal(t, 3, retryhttp.Attempts(resp))
			assert.Equal(t, e.srv.URL, resp.Request.URL.String())
			_, err = resp.Body.Read(make([]byte, 1))
			assert.Error(t, err, "read after close")
		})
	}
}

func TestFirstTrySuccessReturnsNetHTTPsResponse(t *testing.T) {
	e := newEnv(t, statuses(200))
	req := newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil)
	resp, err := e.client(fast(t, 3), nil).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, 1, retryhttp.Attempts(resp))
	assert.Same(t, req, resp.Request)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "response 1", string(b), "the body is unread")
	assert.Equal(t, 0, retryhttp.Attempts(nil))
}
