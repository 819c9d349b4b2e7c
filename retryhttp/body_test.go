package retryhttp_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryhttp"
)

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

var errDisk = errors.New("disk read failed")

// failingBody gives a few bytes, then errDisk.
type failingBody struct{ read bool }

func (b *failingBody) Read(p []byte) (int, error) {
	if b.read {
		return 0, errDisk
	}
	b.read = true
	return copy(p, "partial"), nil
}

func (b *failingBody) Close() error { return nil }

// An error of the request's own body is never retried, also when net/http
// wraps it in a *net.OpError (a declared ContentLength: the connection's
// ReadFrom reads the body) and the request is idempotent (it has a key).
func TestRequestBodyReadErrorIsNotRetried(t *testing.T) {
	for _, cl := range []int64{0, 1000} {
		t.Run(strconv.FormatInt(cl, 10), func(t *testing.T) { requestBodyReadError(t, cl) })
	}
}

func requestBodyReadError(t *testing.T, cl int64) {
	e := newEnv(t, statuses(http.StatusOK))
	tr, err := retryhttp.NewTransport(fast(t, 3), &retryhttp.Options{Base: e.base})
	require.NoError(t, err)
	req := newRequest(t, context.Background(), http.MethodPost, e.srv.URL, nil)
	req.Header.Set(retryhttp.IdempotencyKeyHeader, "k")
	req.Body, req.ContentLength = &failingBody{}, cl
	req.GetBody = func() (io.ReadCloser, error) { return &failingBody{}, nil }

	resp, err := tr.RoundTrip(req)
	require.Error(t, err, "ContentLength %d", cl)
	assert.Nil(t, resp)
	require.ErrorIs(t, err, errDisk, "ContentLength %d", cl)
	assert.Contains(t, err.Error(), "reading the request body")
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 1, re.Attempts, "ContentLength %d: not retried", cl)
	assert.Equal(t, retry.OutcomePermanent, re.Outcome)
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

// stalled503 is the whole of what stallingServer sends on a connection
// before it stalls: a 503 that promises a body of 1000 bytes.
const stalled503 = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 1000\r\n\r\n"

// stallingServer listens on loopback and answers every request with
// stalled503, then sends nothing more until the client closes the
// connection or the test ends. It returns the URL and a count of the
// requests it got.
func stallingServer(t *testing.T) (string, func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
		n     int
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return // the client closed the connection, or the test ended
					}
					req.Body.Close()
					mu.Lock()
					n++
					mu.Unlock()
					if _, err := io.WriteString(c, stalled503); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// A 503 whose body stalls after its headers does not hang a call without
// an attempt timeout or a deadline: the read ahead of its body has a bound
// of its own (Options.ReadAheadTimeout; 1s by default), after which the
// status stands, as when an attempt timeout cuts it. The request is
// retried, and the caller gets the last 503, whose body reads as what
// came (nothing) and then an error that says it was cut. Observers see
// each attempt end on its status, not a timeout.
func TestStalledBodyIsBoundedWithoutAnAttemptTimeout(t *testing.T) {
	const bound = 20 * time.Millisecond
	url, requests := stallingServer(t)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	obs := &recorder{}
	tr, err := retryhttp.NewTransport(fast(t, 2, retry.WithObserver(obs)), &retryhttp.Options{Base: base, ReadAheadTimeout: bound})
	require.NoError(t, err)

	done := make(chan result, 1)
	start := time.Now()
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get(url + "/items")
		done <- result{resp, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(5 * time.Second): // a safety net: the call takes about 2 × 20ms
		t.Fatal("the call hangs on a body that never comes")
	}
	elapsed := time.Since(start)
	require.NoError(t, res.err)
	assert.Equal(t, http.StatusServiceUnavailable, res.resp.StatusCode)
	assert.Equal(t, 2, retryhttp.Attempts(res.resp))
	assert.Less(t, elapsed, time.Second, "two read aheads of 20ms, not the default bound")
	_, err = io.ReadAll(res.resp.Body)
	assert.ErrorContains(t, err, "not read ahead within the read-ahead timeout")
	require.NoError(t, res.resp.Body.Close())
	assert.Equal(t, 2, requests())
	assertEndsOnStatus(t, obs, 2)
}

// With the defaults, retry.New() and no option, a body that stalls is
// cut after DefaultReadAheadTimeout on each attempt, and the caller gets
// the last 503. In a bubble, with an in-process body that never comes (a
// socket would stop the bubble's fake time), so that the 1s default is
// the real one and the test takes no real time.
func TestStalledBodyWithTheDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var writers []*io.PipeWriter
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			pr, pw := io.Pipe() // nothing is ever written
			writers = append(writers, pw)
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, ContentLength: 1000, Body: pr, Request: r}, nil
		})
		r, err := retry.New()
		require.NoError(t, err)
		tr, err := retryhttp.NewTransport(r, &retryhttp.Options{Base: base})
		require.NoError(t, err)

		start := time.Now()
		resp, err := (&http.Client{Transport: tr}).Get("http://api.test/items")
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, 3, retryhttp.Attempts(resp))
		assert.GreaterOrEqual(t, time.Since(start), 3*retryhttp.DefaultReadAheadTimeout, "each attempt's read ahead ran its 1s")
		assert.Less(t, time.Since(start), 3*retryhttp.DefaultReadAheadTimeout+2*time.Second, "then the status stood; the waits between are short")
		_, err = io.ReadAll(resp.Body)
		assert.ErrorContains(t, err, "not read ahead within the read-ahead timeout")
		require.NoError(t, resp.Body.Close())
		require.Len(t, writers, 3)
		for _, pw := range writers {
			pw.Close()
		}
	})
}

func TestAttemptTimeoutDoesNotCutTheFinalBody(t *testing.T) {
	flushed, release := make(chan struct{}), make(chan struct{})
	e := newEnv(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "head ")
		w.(http.Flusher).Flush()
		close(flushed)
		<-release
		io.WriteString(w, "tail")
	})
	r, mock, _ := mocked(t, retry.WithAttemptTimeout(time.Second))
	resp, err := e.client(r, nil).Do(newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	defer resp.Body.Close()
	<-flushed
	mock.Add(time.Hour) // long past the attempt's timeout
	close(release)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the body belongs to the caller once the headers are in")
	assert.Equal(t, "head tail", string(b))
	assert.Equal(t, 1, retryhttp.Attempts(resp))
}

func TestAttemptTimeoutFinalBodyEndsWithTheRequestContext(t *testing.T) {
	flushed, release := make(chan struct{}), make(chan struct{})
	e := newEnv(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "head ")
		w.(http.Flusher).Flush()
		close(flushed)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	r, _, _ := mocked(t, retry.WithAttemptTimeout(time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := e.client(r, nil).Do(newRequest(t, ctx, http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	defer resp.Body.Close()
	<-flushed
	cancel()
	_, err = io.ReadAll(resp.Body)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.Canceled), "got %v", err)
}
