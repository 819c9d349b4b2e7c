package retryhttp_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/retryhttp"
)

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

// TestPermanentStatusIsStoredAsAFailure: with an idempotency store, the
// key of a request that got a permanent status keeps that failure, and a
// repeat replays it without sending.
func TestPermanentStatusIsStoredAsAFailure(t *testing.T) {
	e := newEnv(t, statuses(http.StatusNotFound))
	r, err := retry.New(retry.WithIdempotency(memstore.New(nil), nil))
	require.NoError(t, err)
	c := e.client(r, &retryhttp.Options{PermanentStatuses: []int{http.StatusNotFound}})
	resp, err := postKeyed(t, c, e.srv.URL, "order-17")
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	_, err = postKeyed(t, c, e.srv.URL, "order-17")
	require.ErrorIs(t, err, retry.ErrReplayed)
	assert.True(t, retry.IsPermanent(err))
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.OutcomePermanent, re.Outcome)
	assert.Equal(t, "retryhttp: permanent status 404 Not Found", re.Last.Error())
	assert.NotContains(t, err.Error(), "order-17")
	assert.Equal(t, int64(1), e.requests.Load(), "the repeat was not sent")
}
