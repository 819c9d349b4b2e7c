package retryhttp_test

import (
	"context"
	"errors"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/retryhttp"
)

var retriedByDefault = map[int]bool{408: true, 429: true, 500: true, 502: true, 503: true, 504: true}

// TestStatusTable sends a GET and a POST for every status from 100 to 599:
// a GET is retried on the six default statuses only, a POST on none.
func TestStatusTable(t *testing.T) {
	e := newEnv(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		w.WriteHeader(code)
	})
	c := e.client(fast(t, 3), nil)
	for code := 100; code <= 599; code++ {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			before := e.requests.Load()
			resp, _, err := do(t, c, newRequest(t, context.Background(), method, e.srv.URL+"/?code="+strconv.Itoa(code), nil))
			require.NoError(t, err, "%s %d", method, code)
			want := 1
			if retriedByDefault[code] && method == http.MethodGet {
				want = 3
			}
			assert.Equal(t, int64(want), e.requests.Load()-before, "%s %d: requests sent", method, code)
			assert.Equal(t, want, retryhttp.Attempts(resp), "%s %d: Attempts", method, code)
			switch {
			case code == http.StatusSwitchingProtocols || code >= 200:
				assert.Equal(t, code, resp.StatusCode, "%s %d: the final response is the caller's", method, code)
			default: // informational: the client reads on to the handler's implicit 200
				assert.Equal(t, http.StatusOK, resp.StatusCode)
			}
		}
		if code == http.StatusSwitchingProtocols {
			e.base.CloseIdleConnections() // a 101 leaves a hijacked-looking connection behind
		}
	}
}

func TestStatusesReplaceTheTable(t *testing.T) {
	e := newEnv(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		w.WriteHeader(code)
	})
	c := e.client(fast(t, 2), &retryhttp.Options{Statuses: []int{http.StatusConflict}})
	for code, want := range map[int]int64{409: 2, 503: 1, 500: 1} {
		before := e.requests.Load()
		_, _, err := do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL+"/?code="+strconv.Itoa(code), nil))
		require.NoError(t, err)
		assert.Equal(t, want, e.requests.Load()-before, "status %d", code)
	}

	none := e.client(fast(t, 2), &retryhttp.Options{Statuses: []int{}})
	before := e.requests.Load()
	_, _, err := do(t, none, newRequest(t, context.Background(), http.MethodGet, e.srv.URL+"/?code=503", nil))
	require.NoError(t, err)
	assert.Equal(t, int64(1), e.requests.Load()-before, "Statuses: []int{} retries no status")
}

func TestNewTransportRejectsBadOptions(t *testing.T) {
	for name, tc := range map[string]struct {
		opts  retryhttp.Options
		field string
	}{
		"status 200":         {retryhttp.Options{Statuses: []int{503, 200}}, "Options.Statuses: 200"},
		"status 600":         {retryhttp.Options{Statuses: []int{600}}, "Options.Statuses: 600"},
		"empty method":       {retryhttp.Options{Methods: []string{"GET", ""}}, "Options.Methods"},
		"negative limit":     {retryhttp.Options{BodyLimit: -2}, "Options.BodyLimit -2"},
		"most negative":      {retryhttp.Options{BodyLimit: math.MinInt64}, "Options.BodyLimit"},
		"status 99 (no 1xx)": {retryhttp.Options{Statuses: []int{99}}, "Options.Statuses: 99"},
		"permanent 200":      {retryhttp.Options{PermanentStatuses: []int{404, 200}}, "Options.PermanentStatuses: 200"},
		"permanent 600":      {retryhttp.Options{PermanentStatuses: []int{600}}, "Options.PermanentStatuses: 600"},
		"read-ahead -1ns":    {retryhttp.Options{ReadAheadTimeout: -1}, "Options.ReadAheadTimeout"},
		"read-ahead -1s":     {retryhttp.Options{ReadAheadTimeout: -time.Second}, "Options.ReadAheadTimeout"},
		"nil base pointer":   {retryhttp.Options{Base: (*http.Transport)(nil)}, "Options.Base (*http.Transport)(nil)"},
		"nil base func":      {retryhttp.Options{Base: roundTripFunc(nil)}, "Options.Base"},
		"bad key header":     {retryhttp.Options{IdempotencyKeyHeader: "Bad Name"}, "Options.IdempotencyKeyHeader"},
	} {
		_, err := retryhttp.NewTransport(nil, &tc.opts)
		require.ErrorIs(t, err, retry.ErrInvalidOption, name)
		assert.Contains(t, err.Error(), "retryhttp", name)
		assert.Contains(t, err.Error(), tc.field, name)
		_, err = retryhttp.NewClient(nil, &tc.opts)
		assert.ErrorIs(t, err, retry.ErrInvalidOption, name)
	}
}

// TestZeroOptionsMeanTheDefaults: a nil *Options and the zero Options
// build a Transport, and the fields whose zero is their default take the
// default: the retried statuses and methods, the key header, the body
// limit and the read-ahead timeout (each checked by its own tests too).
func TestZeroOptionsMeanTheDefaults(t *testing.T) {
	for name, opts := range map[string]*retryhttp.Options{"nil": nil, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, statuses(503, 200))
			resp, _, err := do(t, e.client(fast(t, 3), opts), newRequest(t, context.Background(), http.MethodPut, e.srv.URL, onlyReader{strings.NewReader("x")}))
			require.NoError(t, err)
			assert.Equal(t, 2, retryhttp.Attempts(resp), "PUT is retried on 503, its body copied")
			assert.Equal(t, []string{"x", "x"}, e.seenBodies())
		})
	}
	t.Run("NewTransport copies the slices", func(t *testing.T) {
		e := newEnv(t, statuses(409, 200))
		opts := &retryhttp.Options{Statuses: []int{http.StatusConflict}, Methods: []string{http.MethodGet}}
		c := e.client(fast(t, 3), opts)
		opts.Statuses[0], opts.Methods[0] = http.StatusTeapot, http.MethodPost
		resp, _, err := do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 2, retryhttp.Attempts(resp), "409 on a GET is still retried")
	})
}

func TestNilBaseAndRetrierMeanTheDefaults(t *testing.T) {
	e := newEnv(t, statuses(503, 200))
	c, err := retryhttp.NewClient(nil, nil)
	require.NoError(t, err)
	defer c.CloseIdleConnections() // http.DefaultTransport's, through the Transport
	resp, body, err := do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "response 2", body)
	assert.Equal(t, 2, retryhttp.Attempts(resp))
}

func TestBadRequestIsRejectedAndItsBodyClosed(t *testing.T) {
	tr, err := retryhttp.NewTransport(nil, nil)
	require.NoError(t, err)
	_, err = tr.RoundTrip(nil)
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	body := &closeCounter{Reader: strings.NewReader("x")}
	_, err = tr.RoundTrip(&http.Request{Method: http.MethodPost, Body: body})
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.Equal(t, int32(1), body.closed.Load())
}

// freePort returns a loopback address that nothing listens on.
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestConnectionRefusedIsRetriedForAnyMethod(t *testing.T) {
	defer goleak.VerifyNone(t)
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr, err := retryhttp.NewTransport(fast(t, 3), &retryhttp.Options{Base: base})
	require.NoError(t, err)
	c := &http.Client{Transport: tr}
	url := "http://" + freePort(t) + "/orders"
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPatch} {
		_, err := c.Do(newRequest(t, context.Background(), method, url, strings.NewReader("{}")))
		require.Error(t, err, method)
		assert.ErrorIs(t, err, syscall.ECONNREFUSED, method)
		var re *retry.Error
		require.ErrorAs(t, err, &re, method)
		assert.Equal(t, 3, re.Attempts, "%s: the server never saw it, so it is retried", method)
		assert.Equal(t, retry.OutcomeExhausted, re.Outcome)
	}
}

func TestDNSFailureIsRetriedForAnyMethod(t *testing.T) {
	defer goleak.VerifyNone(t)
	var lookups atomic.Int32
	resolver := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		lookups.Add(1)
		return nil, errors.New("no DNS server here")
	}}
	base := &http.Transport{DialContext: (&net.Dialer{Resolver: resolver}).DialContext}
	defer base.CloseIdleConnections()
	tr, err := retryhttp.NewTransport(fast(t, 3), &retryhttp.Options{Base: base})
	require.NoError(t, err)
	_, err = (&http.Client{Transport: tr}).Post("http://orders.test/", "text/plain", strings.NewReader("x"))
	var dnsErr *net.DNSError
	require.ErrorAs(t, err, &dnsErr)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 3, re.Attempts)
	assert.Positive(t, lookups.Load())
}

// dropFirst is a listener whose first connection is closed at once, so
// that the client's first TLS handshake fails.
type dropFirst struct {
	net.Listener
	dropped atomic.Bool
}

func (l *dropFirst) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.dropped.Swap(true) {
			return c, err
		}
		c.Close()
	}
}

func TestTLSHandshakeFailureIsRetriedForAnyMethod(t *testing.T) {
	defer goleak.VerifyNone(t)
	var requests atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		io.Copy(io.Discard, r.Body)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Listener = &dropFirst{Listener: srv.Listener}
	srv.StartTLS()
	defer srv.Close()
	tr, err := retryhttp.NewTransport(fast(t, 3), &retryhttp.Options{Base: srv.Client().Transport})
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: tr}).Post(srv.URL, "text/plain", strings.NewReader("pay"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 2, retryhttp.Attempts(resp), "the failed handshake sent nothing: a POST is retried")
	assert.Equal(t, int32(1), requests.Load())
}

func TestCertificateErrorIsNotRetried(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	base := &http.Transport{} // does not trust the test certificate
	defer base.CloseIdleConnections()
	tr, err := retryhttp.NewTransport(fast(t, 3), &retryhttp.Options{Base: base})
	require.NoError(t, err)
	_, err = (&http.Client{Transport: tr}).Get(srv.URL)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 1, re.Attempts, "another attempt would meet the same certificate")
	assert.Equal(t, retry.OutcomePermanent, re.Outcome)
}

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

func TestResetAfterSendIsRetriedOnlyWhenIdempotent(t *testing.T) {
	t.Run("POST is not retried", func(t *testing.T) {
		e := newEnv(t, hangUp)
		_, err := e.client(fast(t, 3), nil).Post(e.srv.URL, "text/plain", strings.NewReader("pay"))
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 1, re.Attempts, "the server may have acted on it")
		assert.Equal(t, retry.OutcomePermanent, re.Outcome)
		assert.Equal(t, int64(1), e.requests.Load())
	})
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		t.Run(method+" is retried", func(t *testing.T) {
			e := newEnv(t, hangUp)
			resp, body, err := do(t, e.client(fast(t, 3), nil), newRequest(t, context.Background(), method, e.srv.URL, strings.NewReader("x")))
			require.NoError(t, err)
			assert.Equal(t, "response 2", body)
			assert.Equal(t, 2, retryhttp.Attempts(resp))
		})
	}
	t.Run("POST with an Idempotency-Key is retried", func(t *testing.T) {
		e := newEnv(t, hangUp)
		req := newRequest(t, context.Background(), http.MethodPost, e.srv.URL, strings.NewReader("pay"))
		req.Header.Set(retryhttp.IdempotencyKeyHeader, "order-17")
		resp, _, err := do(t, e.client(fast(t, 3), nil), req)
		require.NoError(t, err)
		assert.Equal(t, 2, retryhttp.Attempts(resp))
		assert.Equal(t, []string{"order-17", "order-17"}, e.seenKeys())
	})
}

func TestPostAndPatchNeedAKeyOrAnOptIn(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodPatch} {
		t.Run(method, func(t *testing.T) {
			e := newEnv(t, statuses(503, 200))
			resp, _, err := do(t, e.client(fast(t, 3), nil), newRequest(t, context.Background(), method, e.srv.URL, strings.NewReader("x")))
			require.NoError(t, err)
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "no key: not retried")
			assert.Equal(t, 1, retryhttp.Attempts(resp))

			req := newRequest(t, context.Background(), method, e.srv.URL, strings.NewReader("x"))
			req.Header.Set(retryhttp.IdempotencyKeyHeader, "k1")
			resp, _, err = do(t, e.client(fast(t, 3), nil), req)
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, resp.StatusCode, "a key makes it retryable")

			e.requests.Store(0)
			optIn := e.client(fast(t, 3), &retryhttp.Options{Methods: []string{http.MethodGet, method}})
			resp, _, err = do(t, optIn, newRequest(t, context.Background(), method, e.srv.URL, strings.NewReader("x")))
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, resp.StatusCode, "Methods opts in")
			assert.Equal(t, 2, retryhttp.Attempts(resp))

			e.requests.Store(0)
			resp, _, err = do(t, optIn, newRequest(t, context.Background(), http.MethodDelete, e.srv.URL, nil))
			require.NoError(t, err)
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "Methods replaces the default set")
		})
	}
}

func TestMethodsOfNoneRetriesNoMethod(t *testing.T) {
	e := newEnv(t, statuses(503))
	c := e.client(fast(t, 3), &retryhttp.Options{Methods: []string{}})
	for _, method := range []string{http.MethodPut, http.MethodGet} {
		e.requests.Store(0)
		resp, _, err := do(t, c, newRequest(t, context.Background(), method, e.srv.URL, strings.NewReader("x")))
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, 1, retryhttp.Attempts(resp), method)
		assert.Equal(t, int64(1), e.requests.Load(), "%s is sent once", method)
	}
	e.requests.Store(0)
	req := newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil)
	req.Header.Set(retryhttp.IdempotencyKeyHeader, "k1")
	resp, _, err := do(t, c, req)
	require.NoError(t, err)
	assert.Equal(t, 3, retryhttp.Attempts(resp), "a key still makes a request retryable")
}

func TestAnEmptyMethodIsGET(t *testing.T) {
	t.Run("retried, named and keyed as GET", func(t *testing.T) {
		e := newEnv(t, statuses(503))
		rec := &recorder{}
		r := fast(t, 3, retry.WithObserver(rec))
		for _, opts := range []*retryhttp.Options{nil, {IdempotencyKeys: true}} {
			req := newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil)
			req.Method = ""
			resp, _, err := do(t, e.client(r, opts), req)
			require.NoError(t, err)
			assert.Equal(t, 3, retryhttp.Attempts(resp), "retried as GET is")
		}
		assert.Equal(t, int64(6), e.requests.Load())
		assert.Equal(t, []string{"", "", "", "", "", ""}, e.seenKeys(), "GET is idempotent: no generated key")
		rec.mu.Lock()
		defer rec.mu.Unlock()
		require.Len(t, rec.done, 2)
		assert.Equal(t, "GET "+strings.TrimPrefix(e.srv.URL, "http://"), rec.done[0].Name)
	})
	t.Run("its key is scoped as GET's", func(t *testing.T) {
		e := newEnv(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
		r, err := retry.New(retry.WithIdempotency(memstore.New(nil), nil))
		require.NoError(t, err)
		c := e.client(r, nil)
		for i, method := range []string{"", http.MethodGet} {
			req := newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil)
			req.Method = method
			req.Header.Set(retryhttp.IdempotencyKeyHeader, "k-17")
			_, _, err := do(t, c, req)
			if i == 0 {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, retry.ErrReplayed, "the same request: the store has its key")
			}
		}
		assert.Equal(t, int64(1), e.requests.Load())
	})
}

func TestIdempotencyKeysSendsOneKeyPerRequest(t *testing.T) {
	e := newEnv(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n%2 == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	c := e.client(fast(t, 3), &retryhttp.Options{IdempotencyKeys: true})
	var sent []string
	for range 2 {
		req := newRequest(t, context.Background(), http.MethodPost, e.srv.URL, strings.NewReader("x"))
		resp, _, err := do(t, c, req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Empty(t, req.Header.Get(retryhttp.IdempotencyKeyHeader), "the caller's request is not changed")
		sent = append(sent, resp.Request.Header.Get(retryhttp.IdempotencyKeyHeader))
	}
	keys := e.seenKeys()
	require.Len(t, keys, 4)
	assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, keys[0])
	assert.Equal(t, keys[0], keys[1], "every attempt of a request sends the same key")
	assert.Equal(t, keys[2], keys[3])
	assert.NotEqual(t, keys[0], keys[2], "each request has its own key")
	assert.Equal(t, []string{keys[0], keys[2]}, sent, "the response's Request shows the key")

	req := newRequest(t, context.Background(), http.MethodPost, e.srv.URL, strings.NewReader("x"))
	req.Header.Set(retryhttp.IdempotencyKeyHeader, "mine")
	_, _, err := do(t, c, req)
	require.NoError(t, err)
	assert.Equal(t, []string{"mine", "mine"}, e.seenKeys()[4:], "a caller's key is kept")

	_, _, err = do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, []string{"", ""}, e.seenKeys()[6:], "idempotent methods get no key")
}

func TestIdempotencyStoreRunsAKeyedRequestOnce(t *testing.T) {
	e := newEnv(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
	r, err := retry.New(retry.WithIdempotency(memstore.New(nil), nil))
	require.NoError(t, err)
	c := e.client(r, nil)
	resp, err := postKeyed(t, c, e.srv.URL, "order-17")
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	_, err = postKeyed(t, c, e.srv.URL, "order-17")
	require.ErrorIs(t, err, retry.ErrReplayed, "the store knows the key completed")
	assert.Contains(t, err.Error(), "status 201")
	assert.NotContains(t, err.Error(), "order-17", "keys stay out of error text")
	assert.Equal(t, int64(1), e.requests.Load(), "the second request was not sent")
}

// claimLog is an idempotency store that keeps the key of every Claim.
type claimLog struct {
	retry.IdempotencyStore
	mu   sync.Mutex
	keys []string
}

func (l *claimLog) Claim(ctx context.Context, key, fp string, lease time.Duration) (retry.Claim, error) {
	l.mu.Lock()
	l.keys = append(l.keys, key)
	l.mu.Unlock()
	return l.IdempotencyStore.Claim(ctx, key, fp, lease)
}

func (l *claimLog) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.keys[len(l.keys)-1]
}

func TestIdempotencyStoreTakesAHeaderKeyOfAnyLength(t *testing.T) {
	e := newEnv(t, statuses(503, 201))
	store := &claimLog{IdempotencyStore: memstore.New(nil)}
	r, err := retry.New(retry.WithIdempotency(store, nil), retry.WithBackoff(retry.Constant(0)))
	require.NoError(t, err)
	c := e.client(r, nil)
	host := strings.TrimPrefix(e.srv.URL, "http://")

	resp, err := postKeyed(t, c, e.srv.URL, "order-17")
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, 2, retryhttp.Attempts(resp), "retried on 503")
	assert.Regexp(t, `^http POST `+regexp.QuoteMeta(host)+` [A-Za-z0-9_-]{16} order-17$`, store.last(), "a key that fits is scoped readably, its target hashed")

	for _, n := range []int{249, 255, 4096} {
		key := "SECRET" + strings.Repeat("k", n-len("SECRET"))
		resp, err := postKeyed(t, c, e.srv.URL, key)
		require.NoError(t, err, "a %d-byte key", n)
		assert.Equal(t, http.StatusCreated, resp.StatusCode)
		assert.Equal(t, 1, retryhttp.Attempts(resp), "%d bytes", n)
		scoped := store.last()
		assert.Regexp(t, `^http sha256 [0-9a-f]{64}$`, scoped, "%d bytes: hashed to fit", n)
		assert.NotContains(t, scoped, "SECRET")

		_, err = postKeyed(t, c, e.srv.URL, key)
		require.ErrorIs(t, err, retry.ErrReplayed, "%d bytes: the same key is the same request", n)
		assert.NotContains(t, err.Error(), "SECRET", "keys stay out of error text")
		assert.Equal(t, scoped, store.last())

		other := key[:n-1] + "j"
		_, err = postKeyed(t, c, e.srv.URL, other)
		require.NoError(t, err, "%d bytes: another key is another request", n)
		assert.NotEqual(t, scoped, store.last())
	}
	assert.Equal(t, int64(8), e.requests.Load(), "2 for the first request, then 1 for each new key")
}

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error {
	c.closed.Add(1)
	return nil
}

// TestIdempotencyStoreNeedsAKeyPerRequest pins a limit of the public API:
// the Transport cannot tell whether a Retrier has an idempotency store, so
// a store-backed Retrier refuses a request without a key before sending it.
func TestIdempotencyStoreNeedsAKeyPerRequest(t *testing.T) {
	e := newEnv(t, statuses(200))
	r, err := retry.New(retry.WithIdempotency(memstore.New(nil), nil))
	require.NoError(t, err)
	body := &closeCounter{Reader: strings.NewReader("x")}
	_, err = e.client(r, nil).Do(newRequest(t, context.Background(), http.MethodPut, e.srv.URL, body))
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.Contains(t, err.Error(), "idempotency key is empty")
	assert.Equal(t, int64(0), e.requests.Load())
	assert.Equal(t, int32(1), body.closed.Load())

	_, _, err = do(t, e.client(r, &retryhttp.Options{IdempotencyKeys: true}), newRequest(t, context.Background(), http.MethodPost, e.srv.URL, nil))
	require.NoError(t, err, "with generated keys every POST has one")
}

// roundTripFunc is a base transport made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestABaseThatBreaksTheRoundTripperContract(t *testing.T) {
	tr, err := retryhttp.NewTransport(fast(t, 3), &retryhttp.Options{Base: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil })})
	require.NoError(t, err)
	_, err = tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
	require.ErrorContains(t, err, "neither a response nor an error")
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 1, re.Attempts)

	calls := 0
	tr, err = retryhttp.NewTransport(fast(t, 2), &retryhttp.Options{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, Request: r}, nil // no Body
	})})
	require.NoError(t, err)
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Empty(t, b)
	assert.Equal(t, 2, calls)
}
