package retryhttp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryhttp"
	"github.com/steadfast-go/retry/retryslog"
)

// freePort returns a loopback address that nothing listens on.
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestConnectionRefusedIsRetriedForAnyMethod(t *testing.T) {
	defer goleak.VerifyNone(t)
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr, err := retryhttp.NewTransport(fast(t, 3), &retryhttp.Options{Base: base})
	require.NoError(t, err)
	c := &http.Client{Transport: tr}
	url := "http://" + freePort(t) + "/orders"
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPatch} {
		_, err := c.Do(newRequest(t, context.Background(), method, url, strings.NewReader("{}")))
		require.Error(t, err, method)
		assert.ErrorIs(t, err, syscall.ECONNREFUSED, method)
		var re *retry.Error
		require.ErrorAs(t, err, &re, method)
		assert.Equal(t, 3, re.Attempts, "%s: the server never saw it, so it is retried", method)
		assert.Equal(t, retry.OutcomeExhausted, re.Outcome)
	}
}

func TestDNSFailureIsRetriedForAnyMethod(t *testing.T) {
	defer goleak.VerifyNone(t)
	var lookups atomic.Int32
	resolver := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		lookups.Add(1)
		return nil, errors.New("no DNS server here")
	}}
	base := &http.Transport{DialContext: (&net.Dialer{Resolver: resolver}).DialContext}
	defer base.CloseIdleConnections()
	tr, err := retryhttp.NewTransport(fast(t, 3), &retryhttp.Options{Base: base})
	require.NoError(t, err)
	_, err = (&http.Client{Transport: tr}).Post("http://orders.test/", "text/plain", strings.NewReader("x"))
	var dnsErr *net.DNSError
	require.ErrorAs(t, err, &dnsErr)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 3, re.Attempts)
	assert.Positive(t, lookups.Load())
}

// dropFirst is a listener whose first connection is closed at once, so
// that the client's first TLS handshake fails.
type dropFirst struct {
	net.Listener
	dropped atomic.Bool
}

func (l *dropFirst) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.dropped.Swap(true) {
			return c, err
		}
		c.Close()
	}
}

func TestTLSHandshakeFailureIsRetriedForAnyMethod(t *testing.T) {
	defer goleak.VerifyNone(t)
	var requests atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		io.Copy(io.Discard, r.Body)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Listener = &dropFirst{Listener: srv.Listener}
	srv.StartTLS()
	defer srv.Close()
	tr, err := retryhttp.NewTransport(fast(t, 3), &retryhttp.Options{Base: srv.Client().Transport})
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: tr}).Post(srv.URL, "text/plain", strings.NewReader("pay"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 2, retryhttp.Attempts(resp), "the failed handshake sent nothing: a POST is retried")
	assert.Equal(t, int32(1), requests.Load())
}

func TestCertificateErrorIsNotRetried(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	base := &http.Transport{} // does not trust the test certificate
	defer base.CloseIdleConnections()
	tr, err := retryhttp.NewTransport(fast(t, 3), &retryhttp.Options{Base: base})
	require.NoError(t, err)
	_, err = (&http.Client{Transport: tr}).Get(srv.URL)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 1, re.Attempts, "another attempt would meet the same certificate")
	assert.Equal(t, retry.OutcomePermanent, re.Outcome)
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

// A server's malformed response line is quoted by net/http's error
// ("malformed MIME header line: ..."), and it may hold a header's value:
// neither the error nor the logs repeat it, and errors.As still finds
// the protocol error.
func TestMalformedResponseIsNotQuoted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nsession=s3cret-value\r\n\r\n"))
		_ = c.Close()
	}))
	t.Cleanup(srv.Close)
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := fast(t, 2, retry.WithObserver(retryslog.New(logger, nil)))
	tr, err := retryhttp.NewTransport(r, nil)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/x", nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		resp.Body.Close()
	}
	require.Error(t, err)
	var pe textproto.ProtocolError
	assert.ErrorAs(t, err, &pe, "the original error is still there")
	assert.Contains(t, err.Error(), "malformed")
	assert.NotContains(t, err.Error(), "s3cret-value")
	assert.Contains(t, buf.String(), "malformed")
	assert.NotContains(t, buf.String(), "s3cret-value")
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
