package retryhttp_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
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
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retryhttp"
)

// A Transport that NewTransport did not build, the zero one or a nil one,
// sends nothing: its error names the constructors to use instead of
// package retry's New, and the request's body is closed. Nothing panics.
func TestZeroTransportNamesItsConstructors(t *testing.T) {
	for name, tr := range map[string]*retryhttp.Transport{
		"zero": {},
		"nil":  nil,
	} {
		t.Run(name, func(t *testing.T) {
			body := &closeCounter{Reader: strings.NewReader("pay")}
			req := newRequest(t, t.Context(), http.MethodPost, "http://api.test/orders", body)
			req.GetBody = nil
			resp, err := tr.RoundTrip(req)
			assert.Nil(t, resp)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.Contains(t, err.Error(), "NewTransport")
			assert.Contains(t, err.Error(), "NewClient")
			assert.Equal(t, int32(1), body.closed.Load(), "the request's body is closed")

			_, err = (&http.Client{Transport: tr}).Get("http://api.test/items")
			require.ErrorIs(t, err, retry.ErrInvalidOption, "through a client too")
			assert.Contains(t, err.Error(), "NewTransport")
			tr.CloseIdleConnections() // no base: nothing to do, no panic
		})
	}
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

// TestFailuresBeforeAnAttemptAndUnretriedStatuses checks two claims of
// doc.go: a request that fails before any attempt gets a plain error and no
// observer event; a retryable status that is not retried (a POST without a
// key) is returned and is a success for observers. It was
// TestDocFailuresBeforeAnAttemptAndUnretriedStatuses, written when a review
// checked the package documentation's claims.
func TestFailuresBeforeAnAttemptAndUnretriedStatuses(t *testing.T) {
	e := newEnv(t, statuses(http.StatusServiceUnavailable))
	obs := &recorder{}
	c := e.client(fast(t, 3, retry.WithObserver(obs)), nil)

	req := newRequest(t, context.Background(), http.MethodPost, e.srv.URL, strings.NewReader("pay"))
	req.GetBody, req.ContentLength = nil, 10 // the body has 3 bytes
	_, _, err := do(t, c, req)
	require.Error(t, err)
	var re *retry.Error
	assert.False(t, errors.As(err, &re), "a plain error")
	obs.mu.Lock()
	assert.Empty(t, obs.starts, "no observer event")
	assert.Empty(t, obs.done)
	obs.mu.Unlock()
	assert.Zero(t, e.requests.Load())

	resp, _, err := do(t, c, newRequest(t, context.Background(), http.MethodPost, e.srv.URL, strings.NewReader("pay")))
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, int64(1), e.requests.Load(), "not retried")
	obs.mu.Lock()
	defer obs.mu.Unlock()
	require.Len(t, obs.done, 1)
	assert.Equal(t, retry.OutcomeSuccess, obs.done[0].Outcome, "a success for observers")
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

// A base that is not an *http.Transport may never fire httptrace's
// GotConn: a POST without a key that failed there counts as sent, unless
// the failure is a failed dial.
func TestPostThroughBaseWithoutGotConnFailsClosed(t *testing.T) {
	sent := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		io.Copy(io.Discard, r.Body)
		sent++                          // the server acted on it
		return nil, io.ErrUnexpectedEOF // then the response was cut
	})
	tr, err := retryhttp.NewTransport(fast(t, 3), &retryhttp.Options{Base: base})
	require.NoError(t, err)
	req := newRequest(t, context.Background(), http.MethodPost, "http://api.test/charges", strings.NewReader("amount=100"))
	_, err = tr.RoundTrip(req)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, 1, sent, "not sent again: it may have been acted on")
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 1, re.Attempts)

	// A failed dial is unmistakably unsent, whatever the base.
	sent = 0
	base = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent++
		if sent == 1 {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		}
		return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	tr, err = retryhttp.NewTransport(fast(t, 3), &retryhttp.Options{Base: base})
	require.NoError(t, err)
	req = newRequest(t, context.Background(), http.MethodPost, "http://api.test/charges", strings.NewReader("amount=100"))
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, 2, sent, "retried after a failed dial")
}

// sentThenEOF acts on the request, then loses the reply.
type sentThenEOF struct{ hits *atomic.Int32 }

func (s sentThenEOF) RoundTrip(r *http.Request) (*http.Response, error) {
	s.hits.Add(1)
	_, _ = io.Copy(io.Discard, r.Body)
	return nil, io.ErrUnexpectedEOF
}

// A protocol registered with an *http.Transport reports no connection to
// httptrace: a POST without a key that fails through it counts as sent,
// and is not sent again.
func TestPOSTThroughARegisteredProtocolFailsClosed(t *testing.T) {
	var hits atomic.Int32
	base := &http.Transport{}
	base.RegisterProtocol("h3x", sentThenEOF{&hits})
	tr, err := retryhttp.NewTransport(nil, &retryhttp.Options{Base: base})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, "h3x://api.test/charge", strings.NewReader("amount=5"))
	require.NoError(t, err)
	_, err = tr.RoundTrip(req)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, int32(1), hits.Load())
}

// TestPermanentStatusIsAFailureTheCallerStillGets: a status of
// Options.PermanentStatuses is sent once, whatever the method, and ends the
// call as a permanent failure for observers and dead letters, while the
// caller gets the response, body whole.
func TestPermanentStatusIsAFailureTheCallerStillGets(t *testing.T) {
	long := strings.Repeat("x", retryhttp.DrainLimit+1000) // more than a held body is read ahead
	e := newEnv(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		w.WriteHeader(code)
		if code == http.StatusNotFound {
			w.Write([]byte(long))
		}
	})
	rec := &recorder{}
	sink := deadletter.NewMemorySink()
	r := fast(t, 3, retry.WithObserver(rec), retry.WithDeadLetter(sink, nil), retry.WithAttemptTimeout(time.Minute))
	c := e.client(r, &retryhttp.Options{PermanentStatuses: []int{http.StatusBadRequest, http.StatusNotFound}})
	host := strings.TrimPrefix(e.srv.URL, "http://")

	for _, method := range []string{http.MethodGet, http.MethodPost} {
		before := e.requests.Load()
		resp, body, err := do(t, c, newRequest(t, context.Background(), method, e.srv.URL+"/users/8812?code=404&token=s3cret", nil))
		require.NoError(t, err, method)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, method)
		assert.Equal(t, long, body, "%s: the body is the caller's, unread", method)
		assert.Equal(t, int64(1), e.requests.Load()-before, "%s: not retried", method)
		assert.Equal(t, 1, retryhttp.Attempts(resp), method)
	}
	_, _, err := do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL+"/?code=400", nil))
	require.NoError(t, err)
	before := e.requests.Load()
	_, _, err = do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL+"/?code=503", nil))
	require.NoError(t, err)
	assert.Equal(t, int64(3), e.requests.Load()-before, "the default retried statuses still are")

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.done, 4)
	for i, want := range []retry.Outcome{retry.OutcomePermanent, retry.OutcomePermanent, retry.OutcomePermanent, retry.OutcomeExhausted} {
		assert.Equal(t, want, rec.done[i].Outcome, "call %d", i+1)
		assert.True(t, rec.done[i].DeadLettered, "call %d", i+1)
	}
	var se *retryhttp.StatusError
	require.ErrorAs(t, rec.ends[0].Err, &se)
	assert.Equal(t, http.StatusNotFound, se.StatusCode)
	assert.True(t, se.Permanent)
	assert.True(t, retry.IsPermanent(rec.ends[0].Err), "marked for the Retrier")

	records := sink.Records()
	require.Len(t, records, 4)
	assert.Equal(t, "GET "+host, records[0].Name)
	assert.Equal(t, "POST "+host, records[1].Name)
	for i, want := range []string{
		"retryhttp: permanent status 404 Not Found",
		"retryhttp: permanent status 404 Not Found",
		"retryhttp: permanent status 400 Bad Request",
		"retryhttp: retryable status 503 Service Unavailable",
	} {
		assert.Equal(t, want, records[i].LastError, "record %d", i+1)
	}
	for _, secret := range []string{"8812", "s3cret", "users"} {
		assert.NotContains(t, records[0].LastError+records[0].Name, secret)
	}
}

func TestCancelStopsAnAttemptAtOnce(t *testing.T) {
	for name, opts := range map[string][]retry.Option{
		"":                     nil,
		"with attempt timeout": {retry.WithAttemptTimeout(time.Hour)},
	} {
		t.Run(name, func(t *testing.T) {
			entered, release := make(chan struct{}), make(chan struct{})
			e := newEnv(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
				close(entered)
				select {
				case <-release:
				case <-r.Context().Done():
				}
			})
			defer close(release)
			ctx, cancel := context.WithCancel(context.Background())
			done := async(e.client(fast(t, 3, opts...), nil), newRequest(t, ctx, http.MethodGet, e.srv.URL, nil))
			<-entered
			cancel()
			res := <-done
			require.ErrorIs(t, res.err, context.Canceled)
			var re *retry.Error
			require.ErrorAs(t, res.err, &re)
			assert.Equal(t, retry.OutcomeUnknown, re.Outcome, "cancelled while the request was out")
			assert.ErrorIs(t, res.err, retry.ErrOutcomeUnknown)
			assert.Equal(t, 1, re.Attempts)
			assert.NotContains(t, re.Last.Error(), "timed out", "a cancel is not a timeout")
		})
	}
}

func TestCancelStopsAWaitAtOnce(t *testing.T) {
	e := newEnv(t, statuses(503))
	r, _, armed := mocked(t) // the mock clock never moves: only the cancel can end the wait
	ctx, cancel := context.WithCancel(context.Background())
	done := async(e.client(r, nil), newRequest(t, ctx, http.MethodGet, e.srv.URL, nil))
	<-armed
	cancel()
	res := <-done
	require.ErrorIs(t, res.err, context.Canceled, "the context is done: an error, not the 503")
	var se *retryhttp.StatusError
	require.ErrorAs(t, res.err, &se, "the last attempt's status is in the error")
	assert.Equal(t, http.StatusServiceUnavailable, se.StatusCode)
	assert.Equal(t, "retryhttp: retryable status 503 Service Unavailable", se.Error())
	assert.Equal(t, int64(1), e.newConns.Load())
}

func TestDeadlineDuringAnAttempt(t *testing.T) {
	e := newEnv(t, func(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	_, err := e.client(fast(t, 3), nil).Do(newRequest(t, ctx, http.MethodGet, e.srv.URL, nil))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.OutcomeUnknown, re.Outcome, "the deadline came while the request was out")
	assert.ErrorIs(t, err, retry.ErrOutcomeUnknown)
}

func TestAttemptTimeoutRetriesASlowAttempt(t *testing.T) {
	entered, release := make(chan int, 4), make(chan struct{})
	e := newEnv(t, enteredHandler(1, entered, release))
	defer close(release)
	r, mock, _ := mocked(t, retry.WithAttemptTimeout(time.Second), retry.WithBackoff(retry.Constant(0)))
	done := async(e.client(r, nil), newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	<-entered
	mock.Add(time.Second) // the first attempt's timeout
	res := <-done
	require.NoError(t, res.err)
	defer res.resp.Body.Close()
	assert.Equal(t, http.StatusOK, res.resp.StatusCode)
	assert.Equal(t, 2, retryhttp.Attempts(res.resp))
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

// What doc.go says of a Retrier with a store: IdempotencyKeys keys
// only the methods that are not idempotent, so a GET without a key is
// refused, unless Methods: []string{} leaves no method retried without one.
func TestStoreRefusesUnkeyedGETUnlessEveryMethodGetsAKey(t *testing.T) {
	e := newEnv(t, statuses(http.StatusOK))
	r, err := retry.New(retry.WithIdempotency(memstore.New(nil), nil))
	require.NoError(t, err)

	_, _, err = do(t, e.client(r, &retryhttp.Options{IdempotencyKeys: true}), newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.Zero(t, e.requests.Load(), "nothing sent")

	resp, _, err := do(t, e.client(r, &retryhttp.Options{IdempotencyKeys: true, Methods: []string{}}), newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.NotEmpty(t, resp.Request.Header.Get(retryhttp.IdempotencyKeyHeader))
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

// claimLog is an idempotency store that keeps the key of every Claim.
type claimLog struct {
	idempotency.Store
	mu   sync.Mutex
	keys []string
}

func (l *claimLog) Claim(ctx context.Context, key, fp string, lease time.Duration) (idempotency.Claim, error) {
	l.mu.Lock()
	l.keys = append(l.keys, key)
	l.mu.Unlock()
	return l.Store.Claim(ctx, key, fp, lease)
}

func (l *claimLog) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.keys[len(l.keys)-1]
}

func TestIdempotencyStoreTakesAHeaderKeyOfAnyLength(t *testing.T) {
	e := newEnv(t, statuses(503, 201))
	store := &claimLog{Store: memstore.New(nil)}
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

// A redirect that http.Client follows carries the same Idempotency-Key; it
// is another request (another path), so the store must not replay the
// redirect's status for it.
func TestRedirectWithStoreIsSent(t *testing.T) {
	for _, tc := range []struct {
		method string
		code   int
	}{{http.MethodPost, http.StatusTemporaryRedirect}, {http.MethodGet, http.StatusFound}} {
		t.Run(tc.method, func(t *testing.T) {
			var (
				mu    sync.Mutex
				paths []string
			)
			seen := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), paths...) }
			e := newEnv(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				paths = append(paths, r.URL.RequestURI())
				mu.Unlock()
				if r.URL.Path == "/old" {
					http.Redirect(w, r, "/new?id=7", tc.code)
					return
				}
				io.WriteString(w, "created")
			})
			store := &claimLog{Store: memstore.New(nil)}
			r, err := retry.New(retry.WithIdempotency(store, nil), retry.WithBackoff(retry.Constant(0)))
			require.NoError(t, err)
			c := e.client(r, nil)

			req := newRequest(t, context.Background(), tc.method, e.srv.URL+"/old?id=7", strings.NewReader("pay"))
			req.Header.Set(retryhttp.IdempotencyKeyHeader, "order-42")
			resp, body, err := do(t, c, req)
			require.NoError(t, err, "the redirected request is sent, not replayed")
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "created", body)
			assert.Equal(t, []string{"/old?id=7", "/new?id=7"}, seen())

			store.mu.Lock()
			keys := append([]string(nil), store.keys...)
			store.mu.Unlock()
			require.Len(t, keys, 2)
			assert.NotEqual(t, keys[0], keys[1], "each target has its own store key")
			for _, k := range keys {
				assert.NotContains(t, k, "old", "the path stays out of the store key")
				assert.NotContains(t, k, "new")
				assert.NotContains(t, k, "id=7")
			}

			// The same request again is the same request: replayed.
			req = newRequest(t, context.Background(), tc.method, e.srv.URL+"/old?id=7", strings.NewReader("pay"))
			req.Header.Set(retryhttp.IdempotencyKeyHeader, "order-42")
			_, _, err = do(t, c, req)
			require.ErrorIs(t, err, retry.ErrReplayed)
			assert.Len(t, seen(), 2, "not sent again")
		})
	}
}

// A redirect from http to https of the same host and path is a request of
// its own: it is sent, not replayed as the redirect's status.
func TestRedirectToHTTPSIsSent(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://api.test"+r.URL.RequestURI(), http.StatusPermanentRedirect)
	}))
	t.Cleanup(plain.Close)
	var secureHits atomic.Int32
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		secureHits.Add(1)
		_, _ = io.WriteString(w, "charged")
	}))
	t.Cleanup(secure.Close)
	base := &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			target := plain.Listener.Addr().String()
			if strings.HasSuffix(addr, ":443") {
				target = secure.Listener.Addr().String()
			}
			return (&net.Dialer{}).DialContext(ctx, network, target)
		},
	}
	t.Cleanup(base.CloseIdleConnections)
	r, err := retry.New(retry.WithIdempotency(memstore.New(nil), nil))
	require.NoError(t, err)
	tr, err := retryhttp.NewTransport(r, &retryhttp.Options{Base: base})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, "http://api.test/v1/charges", strings.NewReader("amount=5"))
	require.NoError(t, err)
	req.Header.Set(retryhttp.IdempotencyKeyHeader, "k-1")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, "charged", string(body))
	assert.Equal(t, int32(1), secureHits.Load())
}

// A keyed request sent from inside an idempotent call uses its own
// Idempotency-Key, not the enclosing call's context key, in the store.
func TestKeyedRequestInsideAnIdempotentCall(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	store := memstore.New(nil)
	hr, err := retry.New(retry.WithIdempotency(store, nil))
	require.NoError(t, err)
	client, err := retryhttp.NewClient(hr, nil)
	require.NoError(t, err)
	outer, err := retry.New(retry.WithIdempotency(store, nil))
	require.NoError(t, err)
	ctx := retry.ContextWithIdempotencyKey(context.Background(), "job-1")
	for range 2 { // the second time, the job and the request are replayed
		err = outer.Do(ctx, func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/charge", strings.NewReader("x"))
			require.NoError(t, err)
			req.Header.Set(retryhttp.IdempotencyKeyHeader, "abc")
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			return resp.Body.Close()
		})
		require.NoError(t, err)
	}
	assert.Equal(t, int32(1), hits.Load())
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

// downStore is an idempotency store that cannot record an outcome.
type downStore struct{ *memstore.Store }

func (downStore) Complete(context.Context, string, string, idempotency.StoredOutcome, time.Duration) error {
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

// TestDeadLetterNotRecordedIsAnError: when the attempts end on a retryable
// or permanent status and no sink stores the dead letter, RoundTrip
// returns the error that says so, not the response: the caller still has
// the work. The response's body is closed.
func TestDeadLetterNotRecordedIsAnError(t *testing.T) {
	errSink := errors.New("sink down")
	failing := deadletter.Func(func(context.Context, retry.DeadLetter) error { return errSink })
	for name, tc := range map[string]struct {
		code     int
		attempts int
	}{
		"retryable": {http.StatusServiceUnavailable, 2},
		"permanent": {http.StatusNotFound, 1},
	} {
		t.Run(name, func(t *testing.T) {
			var bodies []*closeCounter
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				b := &closeCounter{Reader: strings.NewReader(strings.Repeat("x", retryhttp.DrainLimit+1))} // not read to its end when held
				bodies = append(bodies, b)
				return &http.Response{StatusCode: tc.code, Header: http.Header{}, Body: b, Request: r}, nil
			})
			tr, err := retryhttp.NewTransport(fast(t, 2, retry.WithDeadLetter(failing, nil)), &retryhttp.Options{Base: base, PermanentStatuses: []int{http.StatusNotFound}})
			require.NoError(t, err)

			resp, err := (&http.Client{Transport: tr}).Get("http://api.test/users/8812?token=s3cret")
			require.Error(t, err)
			assert.Nil(t, resp)
			assert.ErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
			assert.ErrorIs(t, err, errSink)
			var re *retry.Error
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tc.attempts, re.Attempts)
			var se *retryhttp.StatusError
			require.ErrorAs(t, err, &se, "the error names the status")
			assert.Equal(t, tc.code, se.StatusCode)
			require.Len(t, bodies, tc.attempts)
			for i, b := range bodies {
				assert.Equal(t, int32(1), b.closed.Load(), "body %d closed", i+1)
			}
		})
	}
}

// TestDeadLetterRecordedKeepsTheResponse: with a sink that stores the
// record, the caller gets the last response as before.
func TestDeadLetterRecordedKeepsTheResponse(t *testing.T) {
	e := newEnv(t, statuses(http.StatusServiceUnavailable))
	sink := deadletter.NewMemorySink()
	resp, body, err := do(t, e.client(fast(t, 2, retry.WithDeadLetter(sink, nil)), nil), newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "response 2", body)
	assert.Equal(t, 1, sink.Len())
}

// A status of Options.PermanentStatuses is an answer for good: as gRFC A6
// counts a non-retryable status, the Retrier's token bucket hears it as
// neither success nor failure, and is not refunded.
func TestPermanentStatusDoesNotRefundTheBudget(t *testing.T) {
	e := newEnv(t, statuses(http.StatusNotFound))
	b, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.5})
	require.NoError(t, err)
	for range 4 {
		b.Attempted(1, true, false)
	}
	require.Equal(t, 6.0, b.Tokens())
	c := e.client(fast(t, 3, retry.WithOverload(&retry.OverloadOptions{Budget: b})), &retryhttp.Options{PermanentStatuses: []int{http.StatusNotFound}})
	resp, _, err := do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, int64(1), e.requests.Load(), "not retried")
	assert.Equal(t, 6.0, b.Tokens(), "a permanent status refunds nothing")
}
