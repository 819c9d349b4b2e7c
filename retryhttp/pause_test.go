package retryhttp_test

import (
	"context"
	"io"
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

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retryhttp"
)

// The tests of a pause and a rate through a Transport run on a real
// loopback server, with the Retrier, the pause and the rate on one mock
// clock: a Retry-After of 1 s, the least HTTP can say, costs no real
// time, and a request held by the pause cannot go before the test moves
// the clock past its end.

// pauseSpread is the spread of the tests' pauses: the held requests go
// within it after the end.
const pauseSpread = 100 * time.Millisecond

// arrivals counts a server's requests, with the mock clock's time since
// start at each.
type arrivals struct {
	mock  *clock.Mock
	start time.Time
	mu    sync.Mutex
	at    []time.Duration
}

func newArrivals(mock *clock.Mock) *arrivals { return &arrivals{mock: mock, start: mock.Now()} }

func (a *arrivals) add() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.at = append(a.at, a.mock.Now().Sub(a.start))
}

func (a *arrivals) times() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Duration(nil), a.at...)
}

// limitedServer answers its first request 429 with the headers h, and
// every later one 200, noting when each came.
func limitedServer(t *testing.T, seen *arrivals, h http.Header) *env {
	return newEnv(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		seen.add()
		if n == 1 {
			for k, v := range h {
				w.Header()[k] = v
			}
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "ok")
	})
}

// pausedRetrier returns a Retrier on mock whose waits are reported on the
// channel returned, with the guard g (a pause, a rate) and no budget.
func pausedRetrier(t *testing.T, mock *clock.Mock, g retry.OverloadOptions) (*retry.Retrier, <-chan time.Duration) {
	t.Helper()
	armed := make(chan time.Duration, 32)
	g.NoBudget = true
	r, err := retry.New(retry.WithClock(armedClock{mock, armed}), retry.WithOverload(&g),
		retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)), retry.WithJitter(retry.NoJitter))
	require.NoError(t, err)
	return r, armed
}

func newPause(t *testing.T, o overload.PauseOptions) *overload.Pause {
	t.Helper()
	p, err := overload.NewPause(o)
	require.NoError(t, err)
	return p
}

// armedHold receives the next wait Do armed, and checks it ends within the
// spread after the pause's 1s.
func armedHold(t *testing.T, armed <-chan time.Duration, what string) {
	t.Helper()
	select {
	case d := <-armed:
		assert.GreaterOrEqual(t, d, time.Second, "%s: held until the reset", what)
		assert.Less(t, d, time.Second+pauseSpread, "%s: and a share of the spread", what)
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no wait was armed", what)
	}
}

func get(t *testing.T, url string) *http.Request {
	return newRequest(t, context.Background(), http.MethodGet, url, nil)
}

// TestPause_a429HoldsEveryRequestUntilTheReset: one 429 with Retry-After:
// 1 pauses the downstream; every other request through the same client,
// first attempts included, is held until the reset and goes within the
// spread after it, not before, each in one attempt.
func TestPause_a429HoldsEveryRequestUntilTheReset(t *testing.T) {
	mock := clock.NewMock()
	seen := newArrivals(mock)
	e := limitedServer(t, seen, http.Header{"Retry-After": {"1"}})
	p := newPause(t, overload.PauseOptions{Spread: pauseSpread, Clock: mock})
	r, armed := pausedRetrier(t, mock, retry.OverloadOptions{Pause: p})
	c := e.client(r, nil)

	first := async(c, get(t, e.srv.URL))
	armedHold(t, armed, "the 429's own retry")
	require.True(t, p.Paused())
	const held = 8
	var results []<-chan result
	for i := range held {
		results = append(results, async(c, get(t, e.srv.URL+"/"+strconv.Itoa(i))))
		armedHold(t, armed, "a request sent during the pause")
	}
	assert.Equal(t, int64(1), e.requests.Load(), "no held request reached the server")

	mock.Add(time.Second + pauseSpread)
	res := <-first
	require.NoError(t, res.err)
	assert.Equal(t, http.StatusOK, res.resp.StatusCode)
	assert.Equal(t, 2, retryhttp.Attempts(res.resp))
	res.resp.Body.Close()
	for _, ch := range results {
		res := <-ch
		require.NoError(t, res.err)
		assert.Equal(t, http.StatusOK, res.resp.StatusCode)
		assert.Equal(t, 1, retryhttp.Attempts(res.resp), "held, not refused and retried")
		res.resp.Body.Close()
	}
	at := seen.times()
	require.Len(t, at, held+2)
	assert.Zero(t, at[0])
	for _, a := range at[1:] {
		assert.GreaterOrEqual(t, a, time.Second, "nothing reached the server before the reset")
	}
}

// TestPause_aDeadlineBeforeTheResetIsRefusedUnsent: a request whose
// context ends before the pause does is refused at once, unsent, with an
// error matching overload.ErrPaused.
func TestPause_aDeadlineBeforeTheResetIsRefusedUnsent(t *testing.T) {
	mock := clock.NewMock()
	mock.Set(time.Now()) // the Retrier reads a deadline on its clock
	e := limitedServer(t, newArrivals(mock), http.Header{"Retry-After": {"30"}})
	p := newPause(t, overload.PauseOptions{Spread: pauseSpread, Clock: mock})
	r, armed := pausedRetrier(t, mock, retry.OverloadOptions{Pause: p})
	c := e.client(r, nil)

	first := async(c, get(t, e.srv.URL))
	<-armed
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Do(newRequest(t, ctx, http.MethodGet, e.srv.URL, nil))
	require.ErrorIs(t, err, overload.ErrPaused)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.OutcomeRefused, re.Outcome)
	assert.Zero(t, re.Attempts)
	assert.Equal(t, int64(1), e.requests.Load())

	mock.Add(30*time.Second + pauseSpread)
	res := <-first
	require.NoError(t, res.err)
	res.resp.Body.Close()
}

// TestRateLimitResetHeaders: on a 429 without a valid Retry-After, the
// first of Options.RateLimitResetHeaders with a valid value gives the
// wait and pauses the downstream, in seconds or as a Unix time;
// Retry-After wins when valid, and a 503 reads Retry-After only.
func TestRateLimitResetHeaders(t *testing.T) {
	opts := &retryhttp.Options{RateLimitResetHeaders: []string{"x-ratelimit-reset", "RateLimit-Reset"}}
	unix := func(ahead int64) string { return strconv.FormatInt(time.Now().Unix()+ahead, 10) }
	cases := []struct {
		name     string
		code     int
		h        http.Header
		min, max time.Duration // of the wait, before the pause's spread
	}{
		{"seconds", 429, http.Header{"X-Ratelimit-Reset": {"7"}}, 7 * time.Second, 7 * time.Second},
		{"unix_time", 429, http.Header{"X-Ratelimit-Reset": {unix(5)}}, 3 * time.Second, 5 * time.Second},
		{"unix_time_past", 429, http.Header{"X-Ratelimit-Reset": {unix(-60)}}, 0, 0},
		{"second_header", 429, http.Header{"X-Ratelimit-Reset": {"soon"}, "Ratelimit-Reset": {"4"}}, 4 * time.Second, 4 * time.Second},
		{"retry_after_wins", 429, http.Header{"Retry-After": {"2"}, "X-Ratelimit-Reset": {"9"}}, 2 * time.Second, 2 * time.Second},
		{"invalid_retry_after", 429, http.Header{"Retry-After": {"later"}, "X-Ratelimit-Reset": {"3"}}, 3 * time.Second, 3 * time.Second},
		{"not_on_503", 503, http.Header{"X-Ratelimit-Reset": {"9"}}, -1, -1},
		{"not_listed", 429, http.Header{"X-Rate-Limit-Reset": {"9"}}, -1, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mock := clock.NewMock()
			e := newEnv(t, func(n int, w http.ResponseWriter, _ *http.Request) {
				if n == 1 {
					for k, v := range tc.h {
						w.Header()[k] = v
					}
					w.WriteHeader(tc.code)
				}
			})
			p := newPause(t, overload.PauseOptions{Spread: time.Millisecond, Clock: mock})
			r, armed := pausedRetrier(t, mock, retry.OverloadOptions{Pause: p})
			ch := async(e.client(r, opts), get(t, e.srv.URL))
			d := <-armed
			if tc.min < 0 {
				assert.Zero(t, d, "no delay: the backoff's 0")
				assert.False(t, p.Paused())
			} else {
				assert.GreaterOrEqual(t, d, tc.min)
				assert.LessOrEqual(t, d, tc.max+time.Millisecond)
			}
			mock.Add(10 * time.Second)
			res := <-ch
			require.NoError(t, res.err)
			res.resp.Body.Close()
			assert.Equal(t, 2, retryhttp.Attempts(res.resp))
		})
	}
}

func TestParseRateLimitReset(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"0", 0, true},
		{" 60 ", time.Minute, true},
		{"999999999", 999999999 * time.Second, true}, // the largest read as seconds
		{strconv.FormatInt(now.Unix()+90, 10), 90 * time.Second, true},
		{strconv.FormatInt(now.Unix()-90, 10), 0, true},
		{"1000000000", 0, true}, // 2001: a Unix time, past
		{"99999999999999999999999", time.Duration(1<<63 - 1), true},
		{strconv.FormatInt(now.UnixMilli(), 10), time.Duration(1<<63 - 1), true}, // milliseconds: far ahead, capped by the max delay
		{"-5", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"Sun, 29 Nov 2026 12:02:00 GMT", 0, false},
		{"", 0, false},
	}
	for _, tc := range cases {
		got, ok := retryhttp.ParseRateLimitReset(tc.value, now)
		assert.Equal(t, tc.wantOK, ok, tc.value)
		assert.Equal(t, tc.want, got, tc.value)
	}
}

// otherHost starts a second loopback server, whose host differs from the
// env's by its port, answering 200; the env's cleanup, which checks that
// no goroutine is left, runs after it is closed.
func otherHost(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestPartitionByHost: with a Partitioned pause and rate, a 429 from one
// host holds that host's requests only, and each host has its own rate.
func TestPartitionByHost(t *testing.T) {
	t.Run("pause", func(t *testing.T) {
		mock := clock.NewMock()
		a := limitedServer(t, newArrivals(mock), http.Header{"Retry-After": {"1"}})
		b, bRequests := otherHost(t)
		p := newPause(t, overload.PauseOptions{Spread: pauseSpread, Partitioned: true, Clock: mock})
		r, armed := pausedRetrier(t, mock, retry.OverloadOptions{Pause: p})
		c := a.client(r, &retryhttp.Options{Partition: retryhttp.PartitionByHost})

		first := async(c, get(t, a.srv.URL))
		armedHold(t, armed, "the 429's own retry")
		heldA := async(c, get(t, a.srv.URL))
		armedHold(t, armed, "another request to the paused host")
		for range 3 {
			// A real timeout, so that a held request fails rather than hang.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, _, err := do(t, c, newRequest(t, ctx, http.MethodGet, b.URL, nil))
			cancel()
			require.NoError(t, err, "another host is not paused")
			assert.Equal(t, http.StatusOK, resp.StatusCode)
		}
		assert.Equal(t, int64(3), bRequests.Load())
		assert.Equal(t, int64(1), a.requests.Load())
		assert.Empty(t, armed, "no request to the other host waited")

		mock.Add(time.Second + pauseSpread)
		for _, ch := range []<-chan result{first, heldA} {
			res := <-ch
			require.NoError(t, res.err)
			assert.Equal(t, http.StatusOK, res.resp.StatusCode)
			res.resp.Body.Close()
		}
		assert.Equal(t, int64(3), a.requests.Load())
	})
	t.Run("rate", func(t *testing.T) {
		mock := clock.NewMock()
		a := newEnv(t, statuses(http.StatusOK))
		b, bRequests := otherHost(t)
		rate, err := overload.NewRate(overload.RateOptions{PerSecond: 1, Partitioned: true, Clock: mock})
		require.NoError(t, err)
		r, _ := pausedRetrier(t, mock, retry.OverloadOptions{Rate: rate})
		c := a.client(r, &retryhttp.Options{Partition: retryhttp.PartitionByHost})
		_, _, err = do(t, c, get(t, a.srv.URL))
		require.NoError(t, err)
		_, _, err = do(t, c, get(t, a.srv.URL))
		require.ErrorIs(t, err, overload.ErrRateLimited, "the host's second request in its second")
		_, _, err = do(t, c, get(t, b.URL))
		require.NoError(t, err, "another host has a rate of its own")
		assert.Equal(t, int64(1), a.requests.Load())
		assert.Equal(t, int64(1), bRequests.Load())
	})
}

// TestPartition_keyNeverInErrors: the partition key is in no error text.
func TestPartition_keyNeverInErrors(t *testing.T) {
	mock := clock.NewMock()
	e := newEnv(t, statuses(http.StatusOK))
	rate, err := overload.NewRate(overload.RateOptions{PerSecond: 1, Partitioned: true, Clock: mock})
	require.NoError(t, err)
	r, _ := pausedRetrier(t, mock, retry.OverloadOptions{Rate: rate})
	const key = "tenant-4711"
	c := e.client(r, &retryhttp.Options{Partition: func(*http.Request) string { return key }})
	_, _, err = do(t, c, get(t, e.srv.URL))
	require.NoError(t, err)
	_, _, err = do(t, c, get(t, e.srv.URL))
	require.ErrorIs(t, err, overload.ErrRateLimited)
	assert.False(t, findText(err, key), "the key is not in %q", err)
}

// TestRate_refusesPastItsRateBeforeSending: requests past the Retrier's
// OverloadOptions.Rate are refused unsent, with an error matching
// overload.ErrRateLimited, and go again once the rate has room.
func TestRate_refusesPastItsRateBeforeSending(t *testing.T) {
	mock := clock.NewMock()
	e := newEnv(t, statuses(http.StatusOK))
	rate, err := overload.NewRate(overload.RateOptions{PerSecond: 2, Clock: mock})
	require.NoError(t, err)
	r, _ := pausedRetrier(t, mock, retry.OverloadOptions{Rate: rate})
	c := e.client(r, nil)
	for range 2 {
		_, _, err := do(t, c, get(t, e.srv.URL))
		require.NoError(t, err, "within the burst")
	}
	body := &closeCounter{Reader: strings.NewReader("put")}
	_, _, err = do(t, c, newRequest(t, context.Background(), http.MethodPut, e.srv.URL, body))
	require.ErrorIs(t, err, overload.ErrRateLimited)
	assert.Equal(t, overload.RefusedByRate, overload.RefuserOf(err))
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.OutcomeRefused, re.Outcome)
	assert.Zero(t, re.Attempts)
	assert.Equal(t, int64(2), e.requests.Load(), "the refused request was not sent")
	assert.Equal(t, int32(1), body.closed.Load(), "its body closed")

	mock.Add(500 * time.Millisecond)
	_, _, err = do(t, c, get(t, e.srv.URL))
	require.NoError(t, err, "room again after 1/PerSecond")
	assert.Equal(t, int64(3), e.requests.Load())
}
