package retryhttp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryhttp"
	"github.com/steadfast-go/retry/retrystats"
)

// TestAllocs guards the figure in BENCHMARKS.md: a first-try GET through a
// Transport allocates no more than the same GET through a plain client
// (both counts include the loopback server's own allocations).
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	defer goleak.VerifyNone(t)
	srv := okServer()
	defer srv.Close()
	allocs := func(wrap func(http.RoundTripper) http.RoundTripper) float64 {
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		c := &http.Client{Transport: wrap(base)}
		req := newRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
		getOnce(t, c, req)
		return testing.AllocsPerRun(500, func() { getOnce(t, c, req) })
	}
	plain := allocs(func(b http.RoundTripper) http.RoundTripper { return b })
	for name, r := range map[string]*retry.Retrier{
		"no observer":  fast(t, 3),
		"with Stats":   fast(t, 3, retry.WithObserver(new(retrystats.Stats))),
		"zero Retrier": nil,
	} {
		ours := allocs(func(b http.RoundTripper) http.RoundTripper {
			tr, err := retryhttp.NewTransport(r, &retryhttp.Options{Base: b})
			require.NoError(t, err)
			return tr
		})
		assert.LessOrEqual(t, ours, plain, "%s: %v allocations per GET against %v through a plain client", name, ours, plain)
	}
}

// TestAllocs_putWithAnInMemoryBody: a first-try PUT whose body is an
// in-memory reader allocates no more through a Transport than through a
// plain client, since it is sent as it is (net/http writes it with its
// headers); a body wrapped to record its read errors cost 6 allocations
// more.
func TestAllocs_putWithAnInMemoryBody(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	defer goleak.VerifyNone(t)
	srv := okServer()
	defer srv.Close()
	allocs := func(wrap func(http.RoundTripper) http.RoundTripper) float64 {
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		c := &http.Client{Transport: wrap(base)}
		put := func() {
			getOnce(t, c, newRequest(t, context.Background(), http.MethodPut, srv.URL, strings.NewReader("amount=5")))
		}
		put()
		return testing.AllocsPerRun(300, put)
	}
	plain := allocs(func(b http.RoundTripper) http.RoundTripper { return b })
	ours := allocs(func(b http.RoundTripper) http.RoundTripper {
		tr, err := retryhttp.NewTransport(fast(t, 3), &retryhttp.Options{Base: b})
		require.NoError(t, err)
		return tr
	})
	assert.LessOrEqual(t, ours, plain, "%v allocations per PUT against %v through a plain client", ours, plain)
}
