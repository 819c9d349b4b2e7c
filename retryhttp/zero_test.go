package retryhttp_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryhttp"
)

// A Transport that NewTransport did not build, the zero one or a nil one,
// sends nothing: its error names the constructors to use instead of
// package retry's New, and the request's body is closed. Nothing panics.
func TestZeroTransportNamesItsConstructors(t *testing.T) {
	for name, tr := range map[string]*retryhttp.Transport{
		"zero": {},
		"nil":  nil,
	} {
		t.Run(name, func(t *testing.T) {
			body := &closeCounter{Reader: strings.NewReader("pay")}
			req := newRequest(t, t.Context(), http.MethodPost, "http://api.test/orders", body)
			req.GetBody = nil
			resp, err := tr.RoundTrip(req)
			assert.Nil(t, resp)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.Contains(t, err.Error(), "NewTransport")
			assert.Contains(t, err.Error(), "NewClient")
			assert.Equal(t, int32(1), body.closed.Load(), "the request's body is closed")

			_, err = (&http.Client{Transport: tr}).Get("http://api.test/items")
			require.ErrorIs(t, err, retry.ErrInvalidOption, "through a client too")
			assert.Contains(t, err.Error(), "NewTransport")
			tr.CloseIdleConnections() // no base: nothing to do, no panic
		})
	}
}
