package retryhttp_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/retryhttp"
)

// A keyed request sent from inside an idempotent call uses its own
// Idempotency-Key, not the enclosing call's context key, in the store.
func TestKeyedRequestInsideAnIdempotentCall(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	store := memstore.New(nil)
	hr, err := retry.New(retry.WithIdempotency(store, nil))
	require.NoError(t, err)
	client, err := retryhttp.NewClient(hr, nil)
	require.NoError(t, err)
	outer, err := retry.New(retry.WithIdempotency(store, nil))
	require.NoError(t, err)
	ctx := retry.ContextWithIdempotencyKey(context.Background(), "job-1")
	for range 2 { // the second time, the job and the request are replayed
		err = outer.Do(ctx, func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/charge", strings.NewReader("x"))
			require.NoError(t, err)
			req.Header.Set(retryhttp.IdempotencyKeyHeader, "abc")
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			return resp.Body.Close()
		})
		require.NoError(t, err)
	}
	assert.Equal(t, int32(1), hits.Load())
}

// A redirect from http to https of the same host and path is a request of
// its own: it is sent, not replayed as the redirect's status.
func TestRedirectToHTTPSIsSent(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://api.test"+r.URL.RequestURI(), http.StatusPermanentRedirect)
	}))
	t.Cleanup(plain.Close)
	var secureHits atomic.Int32
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		secureHits.Add(1)
		_, _ = io.WriteString(w, "charged")
	}))
	t.Cleanup(secure.Close)
	base := &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			target := plain.Listener.Addr().String()
			if strings.HasSuffix(addr, ":443") {
				target = secure.Listener.Addr().String()
			}
			return (&net.Dialer{}).DialContext(ctx, network, target)
		},
	}
	t.Cleanup(base.CloseIdleConnections)
	r, err := retry.New(retry.WithIdempotency(memstore.New(nil), nil))
	require.NoError(t, err)
	tr, err := retryhttp.NewTransport(r, &retryhttp.Options{Base: base})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, "http://api.test/v1/charges", strings.NewReader("amount=5"))
	require.NoError(t, err)
	req.Header.Set(retryhttp.IdempotencyKeyHeader, "k-1")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, "charged", string(body))
	assert.Equal(t, int32(1), secureHits.Load())
}

// sentThenEOF acts on the request, then loses the reply.
type sentThenEOF struct{ hits *atomic.Int32 }

func (s sentThenEOF) RoundTrip(r *http.Request) (*http.Response, error) {
	s.hits.Add(1)
	_, _ = io.Copy(io.Discard, r.Body)
	return nil, io.ErrUnexpectedEOF
}

// A protocol registered with an *http.Transport reports no connection to
// httptrace: a POST without a key that fails through it counts as sent,
// and is not sent again.
func TestPOSTThroughARegisteredProtocolFailsClosed(t *testing.T) {
	var hits atomic.Int32
	base := &http.Transport{}
	base.RegisterProtocol("h3x", sentThenEOF{&hits})
	tr, err := retryhttp.NewTransport(nil, &retryhttp.Options{Base: base})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, "h3x://api.test/charge", strings.NewReader("amount=5"))
	require.NoError(t, err)
	_, err = tr.RoundTrip(req)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, int32(1), hits.Load())
}
