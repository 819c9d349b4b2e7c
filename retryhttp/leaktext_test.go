package retryhttp_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryhttp"
)

// findText reports whether an error in err's tree has text holding s.
func findText(err error, s string) bool {
	if err == nil {
		return false
	}
	if strings.Contains(err.Error(), s) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return findText(u.Unwrap(), s)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if findText(e, s) {
				return true
			}
		}
	}
	return false
}

// net/http quotes the server's text in the errors of these malformed
// responses: neither the error nor observers repeat it, what net/http says
// before the quote stays readable, and the original is still in the chain.
func TestServerTextInQuotesIsWithheld(t *testing.T) {
	for name, tc := range map[string]struct{ raw, says string }{
		"version":           {"SECRET-abc123 200 OK\r\n\r\n", "malformed HTTP version"},
		"response":          {"secret-token-abc123\r\n\r\n", "malformed HTTP response"},
		"content length":    {"HTTP/1.1 200 OK\r\nContent-Length: abc123\r\n\r\n", "bad Content-Length"},
		"transfer encoding": {"HTTP/1.1 200 OK\r\nTransfer-Encoding: abc123\r\n\r\n", "unsupported transfer encoding"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				c, _, err := w.(http.Hijacker).Hijack()
				if err != nil {
					return
				}
				c.Write([]byte(tc.raw))
				c.Close()
			})
			obs := &recorder{}
			c := e.client(fast(t, 2, retry.WithObserver(obs)), nil)
			_, _, err := do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
			require.Error(t, err)
			assert.NotContains(t, err.Error(), "abc123")
			assert.Contains(t, err.Error(), tc.says)
			assert.True(t, findText(err, "abc123"), "errors.As and errors.Is still find the original")
			obs.mu.Lock()
			defer obs.mu.Unlock()
			require.NotEmpty(t, obs.ends)
			for _, end := range obs.ends {
				require.Error(t, end.Err)
				assert.NotContains(t, end.Err.Error(), "abc123", "observers do not see it")
			}
		})
	}
}

// An ordinary dial error stays readable.
func TestDialErrorTextIsKept(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr, err := retryhttp.NewTransport(fast(t, 2), &retryhttp.Options{Base: base})
	require.NoError(t, err)
	_, err = tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://"+addr, nil))
	require.Error(t, err)
	var op *net.OpError
	require.True(t, errors.As(err, &op))
	assert.Contains(t, err.Error(), "dial tcp "+addr)
}
