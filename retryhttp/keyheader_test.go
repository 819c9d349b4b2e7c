package retryhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/retryhttp"
)

// headerServer is a loopback server that keeps the value of header name
// of every request and answers request n with codes[n-1], the last one
// repeating.
type headerServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string
}

func newHeaderServer(t *testing.T, name string, codes ...int) *headerServer {
	t.Helper()
	s := &headerServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.Header.Get(name))
		n := len(s.seen)
		s.mu.Unlock()
		w.WriteHeader(codes[min(n, len(codes))-1])
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// newClient returns a client through a Transport on http.DefaultTransport,
// whose idle connections are closed when the test ends.
func newClient(t *testing.T, r *retry.Retrier, opts *retryhttp.Options) *http.Client {
	t.Helper()
	tr, err := retryhttp.NewTransport(r, opts)
	require.NoError(t, err)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func (s *headerServer) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// Every attempt of a request keyed by its context carries that key, the
// caller's, in the Idempotency-Key header: the server sees it three times,
// the caller's request is not changed, and the response's Request has it.
func TestContextKeyIsSentOnEveryAttempt(t *testing.T) {
	s := newHeaderServer(t, retryhttp.IdempotencyKeyHeader, 503, 503, 200)
	c := newClient(t, fast(t, 3), nil)
	ctx := retry.ContextWithIdempotencyKey(context.Background(), "job-42")
	req := newRequest(t, ctx, http.MethodGet, s.srv.URL+"/items", nil)
	resp, _, err := do(t, c, req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, []string{"job-42", "job-42", "job-42"}, s.keys())
	assert.Empty(t, req.Header.Get(retryhttp.IdempotencyKeyHeader), "the caller's request is not changed")
	assert.Equal(t, "job-42", resp.Request.Header.Get(retryhttp.IdempotencyKeyHeader))

	// A context key that net/http cannot send as a header value is not
	// sent; the request goes as before.
	ctx = retry.ContextWithIdempotencyKey(context.Background(), "job\n42")
	resp, _, err = do(t, c, newRequest(t, ctx, http.MethodGet, s.srv.URL+"/items", nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, []string{"job-42", "job-42", "job-42", ""}, s.keys())
}

// A request that has the header keeps it: the context key does not
// replace it.
func TestRequestKeyWinsOverTheContextKeyDownstream(t *testing.T) {
	s := newHeaderServer(t, retryhttp.IdempotencyKeyHeader, 503, 200)
	c := newClient(t, fast(t, 3), nil)
	ctx := retry.ContextWithIdempotencyKey(context.Background(), "job-42")
	req := newRequest(t, ctx, http.MethodPost, s.srv.URL+"/charges", strings.NewReader("pay"))
	req.Header.Set(retryhttp.IdempotencyKeyHeader, "charge-7")
	_, _, err := do(t, c, req)
	require.NoError(t, err)
	assert.Equal(t, []string{"charge-7", "charge-7"}, s.keys())
}

// Options.IdempotencyKeyHeader names the header: the key is read from it and
// sent in it, on every attempt, and Idempotency-Key is left alone.
func TestCustomIdempotencyKeyHeader(t *testing.T) {
	const name = "X-Dedupe-Key"
	s := newHeaderServer(t, name, 503, 503, 200)
	std := newHeaderServer(t, retryhttp.IdempotencyKeyHeader, 503, 503, 200)
	c := newClient(t, fast(t, 3), &retryhttp.Options{IdempotencyKeyHeader: "x-dedupe-key", IdempotencyKeys: true})

	ctx := retry.ContextWithIdempotencyKey(context.Background(), "job-42")
	resp, _, err := do(t, c, newRequest(t, ctx, http.MethodPost, s.srv.URL, strings.NewReader("pay")))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, []string{"job-42", "job-42", "job-42"}, s.keys(), "a POST keyed by its context is retried with IdempotencyKeys")
	assert.Empty(t, resp.Request.Header.Values(retryhttp.IdempotencyKeyHeader))

	req := newRequest(t, context.Background(), http.MethodPost, std.srv.URL, strings.NewReader("pay"))
	req.Header.Set(name, "charge-7")
	_, _, err = do(t, c, req)
	require.NoError(t, err)
	assert.Equal(t, []string{"", "", ""}, std.keys(), "the key is read from the named header; Idempotency-Key is not sent")

	generated := newHeaderServer(t, name, 503, 200)
	_, _, err = do(t, c, newRequest(t, context.Background(), http.MethodPost, generated.srv.URL, strings.NewReader("pay")))
	require.NoError(t, err)
	keys := generated.keys()
	require.Len(t, keys, 2)
	assert.Len(t, keys[0], 36, "a generated key, in the named header")
	assert.Equal(t, keys[0], keys[1])

	for _, bad := range []string{" ", "Bad Name", "Key:", "Ключ", "a\x00b"} {
		_, err := retryhttp.NewTransport(nil, &retryhttp.Options{IdempotencyKeyHeader: bad})
		require.ErrorIs(t, err, retry.ErrInvalidOption, bad)
		assert.Contains(t, err.Error(), "Options.IdempotencyKeyHeader", bad)
	}
}

// A context key alone sends the header but does not make a POST
// retryable: only IdempotencyKeys says the server honours keys.
func TestContextKeyAloneDoesNotRetryAPOST(t *testing.T) {
	s := newHeaderServer(t, retryhttp.IdempotencyKeyHeader, 503, 200)
	c := newClient(t, fast(t, 3), nil)
	ctx := retry.ContextWithIdempotencyKey(context.Background(), "job-42")
	resp, _, err := do(t, c, newRequest(t, ctx, http.MethodPost, s.srv.URL, strings.NewReader("pay")))
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, []string{"job-42"}, s.keys())
}

// The outcome-unknown gap, closed by a server that dedupes: the server
// acts on the first attempt, which the attempt timeout cuts before the
// response; the next attempt, and a later redelivery of the same job (a
// new RoundTrip with the same context key), reach it with the same key,
// and it answers from what it did instead of acting again. The key is in
// no error's text, nor in any observer's event.
func TestRedeliveryCarriesTheSameKey(t *testing.T) {
	var (
		mu    sync.Mutex
		done  = map[string]bool{} // keys the server acted on
		acted atomic.Int32
		seen  []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // then the server sees the client go
		key := r.Header.Get(retryhttp.IdempotencyKeyHeader)
		mu.Lock()
		seen = append(seen, key)
		first := key != "" && !done[key]
		done[key] = true
		mu.Unlock()
		if !first {
			w.WriteHeader(http.StatusOK) // a repeat: answered from the first
			return
		}
		acted.Add(1)
		<-r.Context().Done() // acted, then the response is lost
	}))
	t.Cleanup(srv.Close)
	obs := &recorder{}
	c := newClient(t, fast(t, 2, retry.WithAttemptTimeout(20*time.Millisecond), retry.WithObserver(obs)), &retryhttp.Options{IdempotencyKeys: true})
	const key = "job-7f3a9c"
	ctx := retry.ContextWithIdempotencyKey(context.Background(), key)
	for range 2 { // the first delivery, then a redelivery of the same job
		resp, _, err := do(t, c, newRequest(t, ctx, http.MethodPost, srv.URL+"/charges", strings.NewReader("pay")))
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}
	assert.Equal(t, int32(1), acted.Load(), "the server acted once")
	mu.Lock()
	assert.Equal(t, []string{key, key, key}, seen)
	mu.Unlock()

	// An attempt that fails: its error, and the observers', hold no key.
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(stalled.Close)
	_, _, err := do(t, c, newRequest(t, ctx, http.MethodPost, stalled.URL, strings.NewReader("pay")))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, findText(err, key), "the key is in no error's text: %v", err)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	require.NotEmpty(t, obs.ends)
	for _, end := range obs.ends {
		assert.False(t, findText(end.Err, key))
	}
}

// Inside an idempotent call whose context key is the request's (no
// header of its own, the same store, IdempotencyKeys): the request
// is stored under its scoped key and sent with the job's key, where it
// was sent before with a random key, another on each delivery; run again,
// the job is replayed and the request not sent.
func TestContextKeyedRequestInsideAnIdempotentCall(t *testing.T) {
	s := newHeaderServer(t, retryhttp.IdempotencyKeyHeader, 200)
	store := memstore.New(nil)
	hr, err := retry.New(retry.WithIdempotency(store, nil))
	require.NoError(t, err)
	c := newClient(t, hr, &retryhttp.Options{IdempotencyKeys: true})
	outer, err := retry.New(retry.WithIdempotency(store, nil))
	require.NoError(t, err)
	const key = "job-1b2c"
	ctx := retry.ContextWithIdempotencyKey(context.Background(), key)
	for range 2 {
		err = outer.Do(ctx, func(ctx context.Context) error {
			resp, err := c.Do(newRequest(t, ctx, http.MethodPost, s.srv.URL+"/charge", strings.NewReader("x")))
			if err != nil {
				return err
			}
			return resp.Body.Close()
		})
		require.NoError(t, err)
	}
	assert.Equal(t, []string{key}, s.keys())

	// Outside a job, the context key is the store key: sent again, the
	// request is replayed, with an error that holds no key.
	hr2, err := retry.New(retry.WithIdempotency(memstore.New(nil), nil))
	require.NoError(t, err)
	c2 := newClient(t, hr2, &retryhttp.Options{IdempotencyKeys: true})
	for i := range 2 {
		resp, err := (c2).Do(newRequest(t, ctx, http.MethodPost, s.srv.URL+"/charge", strings.NewReader("x")))
		if i == 0 {
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			continue
		}
		require.ErrorIs(t, err, retry.ErrReplayed)
		assert.False(t, findText(err, key), "the key is in no error's text: %v", err)
	}
	assert.Equal(t, []string{key, key}, s.keys())
}
