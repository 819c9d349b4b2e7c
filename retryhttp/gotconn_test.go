package retryhttp_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryhttp"
)

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
