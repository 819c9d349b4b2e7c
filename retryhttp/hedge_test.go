package retryhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
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

// The hedging tests send on loopback through a real net/http server. The
// hedge delay is 1ms of real time, but no test waits on time: a request
// that must not answer first is held by the server until its context
// ends (it lost) or a channel says, and the tests wait on channels.

// hedging returns a Retrier of n attempts, no waits, that hedges an
// attempt unanswered after 1ms.
func hedging(t testing.TB, n int, opts ...retry.Option) *retry.Retrier {
	t.Helper()
	r := fast(t, n, append([]retry.Option{retry.WithHedge(&retry.HedgeOptions{Delay: time.Millisecond})}, opts...)...)
	require.True(t, r.Hedges())
	return r
}

// counting is a base transport that counts the response bodies it hands
// out and how many of them were closed, so a test can tell that none
// leaked, the losers' included.
type counting struct {
	rt             http.RoundTripper
	opened, closed atomic.Int64
}

func (b *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.rt.RoundTrip(req)
	if err == nil {
		b.opened.Add(1)
		resp.Body = &countedBody{ReadCloser: resp.Body, b: b}
	}
	return resp, err
}

type countedBody struct {
	io.ReadCloser
	b    *counting
	once atomic.Bool
}

func (c *countedBody) Close() error {
	if c.once.CompareAndSwap(false, true) {
		c.b.closed.Add(1)
	}
	return c.ReadCloser.Close()
}

// allClosed waits until every body b handed out was closed: a losing
// attempt may still be ending when RoundTrip has returned.
func (b *counting) allClosed(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return b.opened.Load() == b.closed.Load() }, 5*time.Second, time.Millisecond,
		"every response body is closed (%d opened, %d closed)", b.opened.Load(), b.closed.Load())
}

// statusSeen is a base transport that closes seen once a response with
// status code has come back: a server handler holds a request until then,
// so that another attempt's status is in before its own answer. Which
// attempt the server gets first, the first or the hedge, is the network's
// choice under load; the test must not depend on it.
type statusSeen struct {
	rt   http.RoundTripper
	code int
	seen chan struct{}
	once sync.Once
}

func (s *statusSeen) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.rt.RoundTrip(req)
	if err == nil && resp.StatusCode == s.code {
		s.once.Do(func() { close(s.seen) })
	}
	return resp, err
}

// newStatusSeen is a statusSeen for code, made before the server whose
// handler waits on it; seenClient puts it over the env's transport.
func newStatusSeen(code int) *statusSeen {
	return &statusSeen{code: code, seen: make(chan struct{})}
}

// seenClient is countingClient over s.
func (e *env) seenClient(r *retry.Retrier, s *statusSeen) (*http.Client, *counting) {
	e.t.Helper()
	s.rt = e.base
	b := &counting{rt: s}
	tr, err := retryhttp.NewTransport(r, &retryhttp.Options{Base: b})
	require.NoError(e.t, err)
	return &http.Client{Transport: tr}, b
}

// countingClient returns a client through a Transport whose base counts
// the bodies of the env's base transport.
func (e *env) countingClient(r *retry.Retrier, opts *retryhttp.Options) (*http.Client, *counting) {
	e.t.Helper()
	o := retryhttp.Options{}
	if opts != nil {
		o = *opts
	}
	b := &counting{rt: e.base}
	o.Base = b
	tr, err := retryhttp.NewTransport(r, &o)
	require.NoError(e.t, err)
	return &http.Client{Transport: tr}, b
}

// holdFirst holds the first request the server gets until its context
// ends, then tells lost; the later ones get status code and a body naming
// the request. The first the server gets is most often the first
// attempt's, but on a loaded machine the hedge, 1ms later, can overtake
// it: the tests do not depend on which.
func holdFirst(lost chan<- struct{}, code int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			<-r.Context().Done()
			lost <- struct{}{}
			return
		}
		w.WriteHeader(code)
		io.WriteString(w, "response "+strconv.Itoa(n))
	}
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting until %s", what)
	}
}

func TestHedgeFirstSuccessWinsAndTheLoserIsCancelled(t *testing.T) {
	lost := make(chan struct{}, 1)
	e := newEnv(t, holdFirst(lost, http.StatusOK))
	c, b := e.countingClient(hedging(t, 2), nil)
	resp, body, err := do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "response 2", body, "the hedge answered first")
	assert.Equal(t, 2, retryhttp.Attempts(resp))
	waitFor(t, lost, "the first request's context ended on the server")
	b.allClosed(t)
}

// TestHedgeLosersResponseIsClosed: a losing attempt whose response
// arrives all the same (its base ignores the cancel) has that response
// closed, by the Transport, not handed to anyone.
func TestHedgeLosersResponseIsClosed(t *testing.T) {
	e := newEnv(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Held") != "" {
			io.WriteString(w, "held")
			return
		}
		io.WriteString(w, "response "+strconv.Itoa(n))
	})
	var calls atomic.Int32
	cancelled := make(chan struct{}, 1)
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if calls.Add(1) > 1 {
			return e.base.RoundTrip(req)
		}
		ctx := req.Context()
		// The first attempt's response is in, but it answers only once
		// it lost: the other, 1ms later, has won.
		req = req.Clone(context.WithoutCancel(req.Context()))
		req.Header.Set("X-Held", "1")
		resp, err := e.base.RoundTrip(req)
		<-ctx.Done()
		cancelled <- struct{}{}
		return resp, err
	})
	b := &counting{rt: base}
	tr, err := retryhttp.NewTransport(hedging(t, 2), &retryhttp.Options{Base: b})
	require.NoError(t, err)
	resp, body, err := do(t, &http.Client{Transport: tr}, newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(body, "response "), "the request that was not held won: %q", body)
	assert.Equal(t, 2, retryhttp.Attempts(resp))
	waitFor(t, cancelled, "the held attempt's context ended")
	assert.Equal(t, int64(2), b.opened.Load(), "both attempts got a response")
	b.allClosed(t)
}

// TestOnlyIdempotentOrKeyedRequestsAreHedged: with WithHedge, a POST
// without a key, and a keyed POST whose body cannot be sent again, are
// sent once, one request in flight, while a keyed POST sent after them on
// the same Retrier is hedged.
func TestOnlyIdempotentOrKeyedRequestsAreHedged(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan string, 8)
	var mu sync.Mutex
	inFlight, most := map[string]int{}, map[string]int{}
	e := newEnv(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		mu.Lock()
		inFlight[p]++
		most[p] = max(most[p], inFlight[p])
		n := inFlight[p]
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight[p]--
			mu.Unlock()
		}()
		entered <- p
		if p == "/keyed" && n > 1 {
			io.WriteString(w, "hedge") // the keyed POST's hedge: it wins
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "answer")
	})
	obs := new(recorder)
	c, b := e.countingClient(hedging(t, 2, retry.WithObserver(obs)), &retryhttp.Options{
		BodyLimit:     4, // "payload" is longer: streamed once
		OperationName: func(r *http.Request) string { return r.URL.Path },
	})
	post := func(path string, body io.Reader, key string) <-chan result {
		req := newRequest(t, context.Background(), http.MethodPost, e.srv.URL+path, body)
		if key != "" {
			req.Header.Set(retryhttp.IdempotencyKeyHeader, key)
		}
		return async(c, req)
	}
	plain := post("/plain", strings.NewReader("pay"), "")
	require.Equal(t, "/plain", <-entered)
	streamed := post("/streamed", onlyReader{strings.NewReader("payload")}, "order-1")
	require.Equal(t, "/streamed", <-entered)
	keyed := post("/keyed", strings.NewReader("pay"), "order-2")
	// The keyed POST's hedge comes 1ms after its first attempt, which
	// came after the two others' first attempts: had they hedged, their
	// hedges would be in by now, or at least on their way.
	var hedged bool
	for !hedged {
		switch p := <-entered; p {
		case "/keyed":
			mu.Lock()
			hedged = most["/keyed"] > 1
			mu.Unlock()
		default:
			t.Fatalf("a second request to %s while the first is in flight", p)
		}
	}
	k := <-keyed
	require.NoError(t, k.err)
	assert.Equal(t, 2, retryhttp.Attempts(k.resp))
	require.NoError(t, k.resp.Body.Close())
	close(release)
	for path, ch := range map[string]<-chan result{"/plain": plain, "/streamed": streamed} {
		res := <-ch
		require.NoError(t, res.err, path)
		got, err := io.ReadAll(res.resp.Body)
		require.NoError(t, err)
		require.NoError(t, res.resp.Body.Close())
		assert.Equal(t, "answer", string(got), path)
		assert.Equal(t, 1, retryhttp.Attempts(res.resp), path)
	}
	mu.Lock()
	assert.Equal(t, 1, most["/plain"], "a POST without a key is never hedged")
	assert.Equal(t, 1, most["/streamed"], "a body that cannot be sent again is not hedged")
	mu.Unlock()
	obs.mu.Lock()
	for _, s := range obs.starts {
		if s.Name != "/keyed" {
			assert.Equal(t, 1, s.Attempt, "%s: one attempt", s.Name)
		}
	}
	obs.mu.Unlock()
	b.allClosed(t)
}

func TestKeyedPOSTIsHedgedWithOneKey(t *testing.T) {
	for name, tc := range map[string]struct {
		key  string
		opts *retryhttp.Options
	}{
		"its own key":    {key: "order-17"},
		"generated key":  {opts: &retryhttp.Options{IdempotencyKeys: true}},
		"header of mine": {key: "order-18", opts: &retryhttp.Options{IdempotencyKeyHeader: retryhttp.IdempotencyKeyHeader}},
	} {
		t.Run(name, func(t *testing.T) {
			lost := make(chan struct{}, 1)
			e := newEnv(t, holdFirst(lost, http.StatusCreated))
			c, b := e.countingClient(hedging(t, 2), tc.opts)
			req := newRequest(t, context.Background(), http.MethodPost, e.srv.URL, strings.NewReader("pay"))
			if tc.key != "" {
				req.Header.Set(retryhttp.IdempotencyKeyHeader, tc.key)
			}
			resp, body, err := do(t, c, req)
			require.NoError(t, err)
			assert.Equal(t, http.StatusCreated, resp.StatusCode)
			assert.Equal(t, "response 2", body)
			assert.Equal(t, 2, retryhttp.Attempts(resp))
			waitFor(t, lost, "the first request's context ended")
			keys := e.seenKeys()
			require.Len(t, keys, 2)
			assert.NotEmpty(t, keys[0])
			assert.Equal(t, keys[0], keys[1], "both attempts carry the same key")
			if tc.key != "" {
				assert.Equal(t, tc.key, keys[0])
			}
			assert.Equal(t, resp.Request.Header.Get(retryhttp.IdempotencyKeyHeader), keys[0])
			assert.Equal(t, []string{"pay", "pay"}, e.seenBodies(), "each attempt sends the whole body")
			b.allClosed(t)
		})
	}
}

// TestPermanentStatusOnAHedgeEndsTheCall: an attempt's permanent status
// (the hedge's, most often) ends the call at once, the other attempt
// cancelled, and the caller gets that response.
func TestPermanentStatusOnAHedgeEndsTheCall(t *testing.T) {
	lost := make(chan struct{}, 1)
	e := newEnv(t, holdFirst(lost, http.StatusNotFound))
	obs := new(recorder)
	c, b := e.countingClient(hedging(t, 2, retry.WithObserver(obs)), &retryhttp.Options{PermanentStatuses: []int{http.StatusNotFound}})
	resp, body, err := do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, "response 2", body)
	assert.Equal(t, 2, retryhttp.Attempts(resp))
	waitFor(t, lost, "the first request's context ended")
	obs.mu.Lock()
	require.Len(t, obs.done, 1)
	assert.Equal(t, retry.OutcomePermanent, obs.done[0].Outcome)
	obs.mu.Unlock()
	b.allClosed(t)
}

// TestRetryableStatusOnAHedgeLetsTheOthersRun: one attempt's retryable
// status does not end the hedged call: the other runs on and wins. The
// server holds the first request it gets until the other's 503 is back
// at the client. (It held it until an observer heard an attempt end:
// when the hedge reached the server first, the first attempt's 503 was
// told only once the round was decided, which waited for the hedge, held
// for it: a hang under load.)
func TestRetryableStatusOnAHedgeLetsTheOthersRun(t *testing.T) {
	s503 := newStatusSeen(http.StatusServiceUnavailable)
	e := newEnv(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			select {
			case <-s503.seen: // the other attempt has failed
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, "response 1")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "response "+strconv.Itoa(n))
	})
	c, b := e.seenClient(hedging(t, 2), s503)
	resp, body, err := do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "response 1", body)
	assert.Equal(t, 2, retryhttp.Attempts(resp))
	b.allClosed(t)
}

// TestHedgedCallEndsOnTheLastStatus: when every attempt of a hedged call
// gets a retryable status, the caller gets the response whose status the
// call ended on, body whole, the others closed.
func TestHedgedCallEndsOnTheLastStatus(t *testing.T) {
	obs := &recorder{}
	s503 := newStatusSeen(http.StatusServiceUnavailable)
	e := newEnv(t, func(n int, w http.ResponseWriter, r *http.Request) {
		code := http.StatusServiceUnavailable
		if n == 1 { // held until the other's 503 is back: see TestRetryableStatusOnAHedgeLetsTheOthersRun
			select {
			case <-s503.seen:
			case <-r.Context().Done():
				return
			}
			code = http.StatusBadGateway
		}
		w.WriteHeader(code)
		io.WriteString(w, "response "+strconv.Itoa(n))
	})
	c, b := e.seenClient(hedging(t, 2, retry.WithObserver(obs)), s503)
	resp, body, err := do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, 2, retryhttp.Attempts(resp))
	obs.mu.Lock()
	require.Len(t, obs.done, 1)
	var se *retryhttp.StatusError
	require.ErrorAs(t, obs.done[0].Err, &se)
	obs.mu.Unlock()
	assert.Equal(t, se.StatusCode, resp.StatusCode, "the response of the status the call ended on")
	want := map[int]string{http.StatusBadGateway: "response 1", http.StatusServiceUnavailable: "response 2"}
	assert.Equal(t, want[resp.StatusCode], body)
	b.allClosed(t)
}

// TestHedgedKeyedPOSTWithAStore: a hedged keyed request's outcome, which
// closes as a loser's must, is still stored as its status and replayed.
func TestHedgedKeyedPOSTWithAStore(t *testing.T) {
	lost := make(chan struct{}, 1)
	e := newEnv(t, holdFirst(lost, http.StatusCreated))
	r := hedging(t, 2, retry.WithIdempotency(memstore.New(nil), nil))
	c, b := e.countingClient(r, nil)
	resp, err := postKeyed(t, c, e.srv.URL, "order-17")
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	waitFor(t, lost, "the first request's context ended")
	_, err = postKeyed(t, c, e.srv.URL, "order-17")
	require.ErrorIs(t, err, retry.ErrReplayed)
	assert.Contains(t, err.Error(), "status 201")
	assert.Equal(t, int64(2), e.requests.Load(), "the repeat was not sent")
	b.allClosed(t)
}

// TestManyConcurrentHedgedRequests runs hedged GETs and keyed POSTs side
// by side, on a server that answers some at once, fails some with 503
// and stalls others a little: for the race detector, and to check that
// every response body, the losers' too, is closed.
func TestManyConcurrentHedgedRequests(t *testing.T) {
	e := newEnv(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n % 3 {
		case 0:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 1:
			select {
			case <-r.Context().Done():
				return
			case <-time.After(2 * time.Millisecond): // on the server: a slow answer
			}
		}
		io.WriteString(w, "response "+strconv.Itoa(n))
	})
	c, b := e.countingClient(hedging(t, 4), nil)
	const workers, each = 16, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for i := range workers {
		wg.Go(func() {
			for j := range each {
				var req *http.Request
				if (i+j)%2 == 0 {
					req = newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil)
				} else {
					req = newRequest(t, context.Background(), http.MethodPost, e.srv.URL, strings.NewReader("pay"))
					req.Header.Set(retryhttp.IdempotencyKeyHeader, "k-"+strconv.Itoa(i)+"-"+strconv.Itoa(j))
				}
				resp, err := c.Do(req)
				if err != nil {
					errs <- err
					continue
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case err != nil:
					errs <- err
				case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable:
					errs <- errors.New("status " + resp.Status)
				case !strings.HasPrefix(string(got), "response "):
					errs <- errors.New("body " + string(got))
				case retryhttp.Attempts(resp) < 1 || retryhttp.Attempts(resp) > 4:
					errs <- errors.New("attempts " + strconv.Itoa(retryhttp.Attempts(resp)))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	b.allClosed(t)
}
