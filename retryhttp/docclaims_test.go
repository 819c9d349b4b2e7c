package retryhttp_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/retryhttp"
)

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

// A request that fails before any attempt gets a plain error and no
// observer event; a retryable status that is not retried (a POST without
// a key) is returned and is a success for observers.
func TestDocFailuresBeforeAnAttemptAndUnretriedStatuses(t *testing.T) {
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
