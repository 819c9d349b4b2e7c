package retryhttp_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryhttp"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"seconds", "120", 2 * time.Minute, true},
		{"zero", "0", 0, true},
		{"spaces", "  5 ", 5 * time.Second, true},
		{"imf_fixdate", "Sun, 29 Nov 2026 12:02:00 GMT", 2 * time.Minute, true},
		{"rfc850", "Sunday, 29-Nov-26 12:00:30 GMT", 30 * time.Second, true},
		{"asctime", "Sun Nov 29 12:01:00 2026", time.Minute, true},
		{"past_date", "Sun, 29 Nov 2026 11:00:00 GMT", 0, true},
		{"huge", "99999999999999999999999", time.Duration(math.MaxInt64), true},
		{"beyond_duration", "9223372037", time.Duration(math.MaxInt64), true},
		{"negative", "-5", 0, false},
		{"fraction", "1.5", 0, false},
		{"garbage", "soon", 0, false},
		{"empty", "", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := retryhttp.ParseRetryAfter(tc.value, now)
			assert.Equal(t, tc.wantOK, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

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

// handlerTransport serves requests in process with h: no socket, so it
// works inside a synctest bubble, where a real socket would stop the fake
// clock (a goroutine blocked on network I/O is not durably blocked).
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// TestUnderSynctestWithAnInProcessTransport is docs/http.md's second recipe
// for testing an HTTP caller: real waits of the real clock, made instant
// and exact by the bubble's fake time.
func TestUnderSynctestWithAnInProcessTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if calls++; calls < 3 {
				w.Header().Set("Retry-After", "20")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			io.WriteString(w, "done")
		})
		r, err := retry.New(retry.WithMaxAttempts(3))
		require.NoError(t, err)
		tr, err := retryhttp.NewTransport(r, &retryhttp.Options{Base: handlerTransport{h}})
		require.NoError(t, err)
		c := &http.Client{Transport: tr}

		start := time.Now()
		resp, err := c.Get("http://api.test/items")
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, 40*time.Second, time.Since(start), "two waits of Retry-After: 20, exactly")
		assert.Equal(t, 3, retryhttp.Attempts(resp))
	})
}
