package retryhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryhttp"
)

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

// retryAfter answers the first request with code and a Retry-After header
// of value, the later ones with 200.
func retryAfter(code int, value func() string) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", value())
			w.WriteHeader(code)
		}
	}
}

func TestRetryAfterSetsTheNextWait(t *testing.T) {
	inSeconds := func(s string) func() string { return func() string { return s } }
	inFiveSeconds := func() string { return time.Now().Add(5 * time.Second).UTC().Format(http.TimeFormat) }
	for name, tc := range map[string]struct {
		code     int
		value    func() string
		min, max time.Duration
	}{
		"503 delta-seconds":             {503, inSeconds("7"), 7 * time.Second, 7 * time.Second},
		"429 delta-seconds":             {429, inSeconds("1"), time.Second, time.Second},
		"503 zero":                      {503, inSeconds("0"), 0, 0},
		"503 HTTP-date":                 {503, inFiveSeconds, 3 * time.Second, 5 * time.Second},
		"429 HTTP-date":                 {429, inFiveSeconds, 3 * time.Second, 5 * time.Second},
		"hours: capped by max delay":    {503, inSeconds("7200"), 10 * time.Second, 10 * time.Second},
		"a date in the past: no wait":   {503, inSeconds("Wed, 21 Oct 2015 07:28:00 GMT"), 0, 0},
		"malformed: the backoff's wait": {503, inSeconds("soon"), 2 * time.Second, 2 * time.Second},
		"negative: the backoff's wait":  {429, inSeconds("-3"), 2 * time.Second, 2 * time.Second},
		"500: the backoff's wait":       {500, inSeconds("7"), 2 * time.Second, 2 * time.Second},
		"502: the backoff's wait":       {502, inSeconds("7"), 2 * time.Second, 2 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, retryAfter(tc.code, tc.value))
			r, mock, armed := mocked(t)
			done := async(e.client(r, nil), newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
			var d time.Duration // 0 unless a wait is armed
			var res result
			select {
			case d = <-armed:
				mock.Add(d)
				res = <-done
			case res = <-done:
			}
			require.NoError(t, res.err)
			res.resp.Body.Close()
			assert.Equal(t, http.StatusOK, res.resp.StatusCode)
			assert.GreaterOrEqual(t, d, tc.min)
			assert.LessOrEqual(t, d, tc.max)
		})
	}
}

func TestAWaitPastTheDeadlineIsNotStarted(t *testing.T) {
	e := newEnv(t, retryAfter(503, func() string { return "120" }))
	r, mock, armed := mocked(t, retry.WithMaxDelay(time.Minute))
	ctx, cancel := mock.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := async(e.client(r, nil), newRequest(t, ctx, http.MethodGet, e.srv.URL, nil))
	select {
	case res := <-done:
		require.NoError(t, res.err, "the context is live: the caller gets the server's answer")
		res.resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, res.resp.StatusCode)
		assert.Equal(t, "120", res.resp.Header.Get("Retry-After"))
		assert.Equal(t, 1, retryhttp.Attempts(res.resp))
	case d := <-armed:
		t.Fatalf("a wait of %v was started with 30s left", d)
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

func TestAttemptTimeoutErrorIsADeadline(t *testing.T) {
	entered, release := make(chan int, 4), make(chan struct{})
	e := newEnv(t, enteredHandler(2, entered, release))
	defer close(release)
	rec := &recorder{}
	r, mock, _ := mocked(t, retry.WithAttemptTimeout(time.Second), retry.WithBackoff(retry.Constant(0)),
		retry.WithMaxAttempts(2), retry.WithObserver(rec))
	req := newRequest(t, context.Background(), http.MethodPost, e.srv.URL, strings.NewReader("x"))
	req.Header.Set(retryhttp.IdempotencyKeyHeader, "k")
	done := async(e.client(r, nil), req)
	for range 2 {
		<-entered
		mock.Add(time.Second)
	}
	res := <-done
	require.ErrorIs(t, res.err, context.DeadlineExceeded)
	assert.NotErrorIs(t, res.err, context.Canceled, "a timed-out attempt is not a cancelled one")
	var re *retry.Error
	require.ErrorAs(t, res.err, &re)
	assert.Equal(t, retry.OutcomeExhausted, re.Outcome)
	assert.Equal(t, 2, re.Attempts)
	assert.Contains(t, re.Last.Error(), "timed out before its response headers")
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
