package retryhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryhttp"
)

var errDisk = errors.New("disk read failed")

// failingBody gives a few bytes, then errDisk.
type failingBody struct{ read bool }

func (b *failingBody) Read(p []byte) (int, error) {
	if b.read {
		return 0, errDisk
	}
	b.read = true
	return copy(p, "partial"), nil
}

func (b *failingBody) Close() error { return nil }

// An error of the request's own body is never retried, also when net/http
// wraps it in a *net.OpError (a declared ContentLength: the connection's
// ReadFrom reads the body) and the request is idempotent (it has a key).
func TestRequestBodyReadErrorIsNotRetried(t *testing.T) {
	for _, cl := range []int64{0, 1000} {
		t.Run(strconv.FormatInt(cl, 10), func(t *testing.T) { requestBodyReadError(t, cl) })
	}
}

func requestBodyReadError(t *testing.T, cl int64) {
	e := newEnv(t, statuses(http.StatusOK))
	tr, err := retryhttp.NewTransport(fast(t, 3), &retryhttp.Options{Base: e.base})
	require.NoError(t, err)
	req := newRequest(t, context.Background(), http.MethodPost, e.srv.URL, nil)
	req.Header.Set(retryhttp.IdempotencyKeyHeader, "k")
	req.Body, req.ContentLength = &failingBody{}, cl
	req.GetBody = func() (io.ReadCloser, error) { return &failingBody{}, nil }

	resp, err := tr.RoundTrip(req)
	require.Error(t, err, "ContentLength %d", cl)
	assert.Nil(t, resp)
	require.ErrorIs(t, err, errDisk, "ContentLength %d", cl)
	assert.Contains(t, err.Error(), "reading the request body")
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 1, re.Attempts, "ContentLength %d: not retried", cl)
	assert.Equal(t, retry.OutcomePermanent, re.Outcome)
}
