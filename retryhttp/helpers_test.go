package retryhttp_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryhttp"
)

// TestMain fails the package if any test leaves a goroutine behind; each
// test also checks on its own (see newEnv).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is one test's world: a loopback server, a base transport of its
// own, and counts of what the server saw.
type env struct {
	t        *testing.T
	srv      *httptest.Server
	base     *http.Transport
	newConns atomic.Int64 // connections the server accepted
	requests atomic.Int64 // requests the server's handler got

	mu     sync.Mutex
	keys   []string // Idempotency-Key of each request
	bodies []string // body of each request
}

// newEnv starts a server on loopback with handler h, which gets the
// request's number (1 for the first). At the end of the test it closes
// everything and fails the test if a goroutine or connection is left.
func newEnv(t *testing.T, h func(n int, w http.ResponseWriter, r *http.Request)) *env {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) }) // first registered: runs last
	e := &env{t: t}
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(e.requests.Add(1))
		b, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.keys = append(e.keys, r.Header.Get(retryhttp.IdempotencyKeyHeader))
		e.bodies = append(e.bodies, string(b))
		e.mu.Unlock()
		h(n, w, r)
	}))
	e.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.newConns.Add(1)
		}
	}
	e.srv.Start()
	e.base = &http.Transport{}
	t.Cleanup(func() {
		e.base.CloseIdleConnections()
		e.srv.Close()
	})
	return e
}

// statuses answers request n with codes[n-1], the last one repeating, and
// a body naming the request.
func statuses(codes ...int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(codes[min(n, len(codes))-1])
		io.WriteString(w, "response "+strconv.Itoa(n))
	}
}

// client returns a client through a Transport on the env's base.
// opts may be nil; its Base is replaced by the env's.
func (e *env) client(r *retry.Retrier, opts *retryhttp.Options) *http.Client {
	e.t.Helper()
	o := retryhttp.Options{}
	if opts != nil {
		o = *opts
	}
	o.Base = e.base
	tr, err := retryhttp.NewTransport(r, &o)
	require.NoError(e.t, err)
	return &http.Client{Transport: tr}
}

func (e *env) seenKeys() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.keys...)
}

func (e *env) seenBodies() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.bodies...)
}

// fast returns a Retrier with n attempts and no waits.
func fast(t testing.TB, n int, opts ...retry.Option) *retry.Retrier {
	t.Helper()
	r, err := retry.New(append([]retry.Option{
		retry.WithMaxAttempts(n), retry.WithBackoff(retry.Constant(0)), retry.WithJitter(retry.NoJitter),
	}, opts...)...)
	require.NoError(t, err)
	return r
}

// do sends req and, on success, reads and closes the body.
func do(t *testing.T, c *http.Client, req *http.Request) (*http.Response, string, error) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp, string(b), nil
}

// postKeyed sends a POST with the body "pay" and Idempotency-Key key, and
// on success reads and closes the response's body.
func postKeyed(t *testing.T, c *http.Client, url, key string) (*http.Response, error) {
	t.Helper()
	req := newRequest(t, context.Background(), http.MethodPost, url, strings.NewReader("pay"))
	req.Header.Set(retryhttp.IdempotencyKeyHeader, key)
	resp, _, err := do(t, c, req)
	return resp, err
}

func newRequest(t testing.TB, ctx context.Context, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	require.NoError(t, err)
	return req
}

// result is what a RoundTrip run on another goroutine gave.
type result struct {
	resp *http.Response
	err  error
}

func async(c *http.Client, req *http.Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		resp, err := c.Do(req)
		ch <- result{resp, err}
	}()
	return ch
}

// recorder is an Observer that keeps every event.
type recorder struct {
	mu      sync.Mutex
	starts  []retry.AttemptStart
	ends    []retry.AttemptEnd
	retries []retry.Scheduled
	waits   []retry.WaitEnd
	done    []retry.Done
}

func (r *recorder) OnAttemptStart(_ context.Context, e retry.AttemptStart) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, e)
}

func (r *recorder) OnAttemptEnd(_ context.Context, e retry.AttemptEnd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ends = append(r.ends, e)
}

func (r *recorder) OnRetry(_ context.Context, e retry.Scheduled) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retries = append(r.retries, e)
}

func (r *recorder) OnWaitEnd(_ context.Context, e retry.WaitEnd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits = append(r.waits, e)
}

func (r *recorder) OnDone(_ context.Context, e retry.Done) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = append(r.done, e)
}

func (r *recorder) delays() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var d []time.Duration
	for _, e := range r.retries {
		d = append(d, e.Delay)
	}
	return d
}

// assertEndsOnStatus checks that obs saw n attempts, each ending on its
// status (a *StatusError), not on a timeout.
func assertEndsOnStatus(t *testing.T, obs *recorder, n int) {
	t.Helper()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	require.Len(t, obs.ends, n)
	for _, end := range obs.ends {
		var se *retryhttp.StatusError
		assert.ErrorAs(t, end.Err, &se, "each attempt ended on its status, not a timeout")
	}
}

// roundTripFunc is a base transport made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error {
	c.closed.Add(1)
	return nil
}

// onlyReader hides every method but Read, so http.NewRequest cannot set
// GetBody.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// hangUp closes the connection of the first request without a response,
// after reading it, and answers the later ones.
func hangUp(n int, w http.ResponseWriter, _ *http.Request) {
	if n == 1 {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	io.WriteString(w, "response "+strconv.Itoa(n))
}

// findText reports whether an error in err's tree has text holding s.
func findText(err error, s string) bool {
	if err == nil {
		return false
	}
	if strings.Contains(err.Error(), s) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return findText(u.Unwrap(), s)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if findText(e, s) {
				return true
			}
		}
	}
	return false
}

// mocked returns a Retrier on a mock clock whose waits are reported on
// armed, with a 2s constant backoff and a 10s max delay.
func mocked(t *testing.T, opts ...retry.Option) (*retry.Retrier, *clock.Mock, <-chan time.Duration) {
	mock := clock.NewMock()
	armed := make(chan time.Duration, 8)
	r, err := retry.New(append([]retry.Option{
		retry.WithClock(armedClock{mock, armed}),
		retry.WithBackoff(retry.Constant(2 * time.Second)), retry.WithJitter(retry.NoJitter),
		retry.WithMaxDelay(10 * time.Second), retry.WithMaxAttempts(3),
	}, opts...)...)
	require.NoError(t, err)
	return r, mock, armed
}

// armedClock is a mock clock that reports each wait Do arms on armed
// (buffered, unlike retrytest.Clock's).
type armedClock struct {
	*clock.Mock
	armed chan time.Duration
}

func (c armedClock) WaitArmed(d time.Duration) { c.armed <- d }

// enteredHandler holds each of the first n requests, after telling entered,
// until release is closed or the request ends; it answers the later ones.
func enteredHandler(n int, entered chan<- int, release <-chan struct{}) func(int, http.ResponseWriter, *http.Request) {
	return func(i int, w http.ResponseWriter, r *http.Request) {
		if i <= n {
			entered <- i
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		io.WriteString(w, "late but fine")
	}
}
