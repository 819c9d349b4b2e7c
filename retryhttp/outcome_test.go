package retryhttp_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/retryhttp"
)

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
