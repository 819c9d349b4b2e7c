package retryhttp_test

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
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

// TestPermanentStatusesAndTheRetriedSet: a permanent status named from
// the default retried set is no longer retried; one named in Statuses
// too is a contradiction.
func TestPermanentStatusesAndTheRetriedSet(t *testing.T) {
	e := newEnv(t, statuses(500))
	rec := &recorder{}
	resp, _, err := do(t, e.client(fast(t, 3, retry.WithObserver(rec)), &retryhttp.Options{PermanentStatuses: []int{500}}),
		newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	assert.Equal(t, int64(1), e.requests.Load())
	require.Len(t, rec.done, 1)
	assert.Equal(t, retry.OutcomePermanent, rec.done[0].Outcome)

	for _, opts := range []*retryhttp.Options{
		{Statuses: []int{503, 404}, PermanentStatuses: []int{404}},
		{PermanentStatuses: []int{404}, Statuses: []int{404}},
	} {
		_, err := retryhttp.NewTransport(nil, opts)
		require.ErrorIs(t, err, retry.ErrInvalidOption)
		assert.ErrorContains(t, err, "status 404 is in both Options.Statuses and Options.PermanentStatuses")
	}
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
		"bad reset header":   {retryhttp.Options{RateLimitResetHeaders: []string{"X-RateLimit-Reset", "Reset:"}}, "Options.RateLimitResetHeaders"},
		"empty reset header": {retryhttp.Options{RateLimitResetHeaders: []string{""}}, "Options.RateLimitResetHeaders"},
		"reset Retry-After":  {retryhttp.Options{RateLimitResetHeaders: []string{"retry-after"}}, "Retry-After is always read first"},
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
