package benchmarks

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryhttp"
)

// httpSetup builds a client on its own base transport, so each setup has
// its own connections.
type httpSetup struct {
	name  string
	build func(tb testing.TB, base *http.Transport) *http.Client
}

var httpSetups = []httpSetup{
	{"Plain", func(_ testing.TB, base *http.Transport) *http.Client {
		return &http.Client{Transport: handLoop{base}}
	}},
	{"Steadfast", func(tb testing.TB, base *http.Transport) *http.Client {
		r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)), retry.WithJitter(retry.NoJitter))
		require.NoError(tb, err)
		tr, err := retryhttp.NewTransport(r, &retryhttp.Options{Base: base})
		require.NoError(tb, err)
		return &http.Client{Transport: tr}
	}},
	{"RetryableHTTP", func(_ testing.TB, base *http.Transport) *http.Client {
		c := retryablehttp.NewClient()
		c.HTTPClient = &http.Client{Transport: base}
		c.RetryMax = 2 // 3 attempts in all
		c.RetryWaitMin, c.RetryWaitMax = 0, 0
		c.Backoff = func(time.Duration, time.Duration, int, *http.Response) time.Duration { return 0 }
		c.Logger = nil
		return c.StandardClient()
	}},
}

// handLoop is the floor: a RoundTripper that sends a GET up to 3 times
// while the status is 503, draining and closing each body it drops, with
// nothing else (no backoff, no classification, no Retry-After).
type handLoop struct{ base http.RoundTripper }

func (h handLoop) RoundTrip(req *http.Request) (*http.Response, error) {
	for i := 1; ; i++ {
		resp, err := h.base.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || i == 3 {
			return resp, err
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
	}
}

// cycleServer answers 503, 503, 200 in turn, each with a short body, and
// counts requests and connections.
func cycleServer(first int) (*httptest.Server, *atomic.Int64, *atomic.Int64) {
	var requests, conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n := requests.Add(1); int(n-1)%3 < first {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "busy")
			return
		}
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	return srv, &requests, &conns
}

func getOK(tb testing.TB, c *http.Client, req *http.Request) {
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("status %d", resp.StatusCode)
	}
}

func runHTTP(b *testing.B, s httpSetup, failures int) {
	srv, _, _ := cycleServer(failures)
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	c := s.build(b, base)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
	require.NoError(b, err)
	getOK(b, c, req) // open the connection
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		getOK(b, c, req)
	}
}

// BenchmarkHTTPFirstTry is a GET on loopback answered 200 at once.
func BenchmarkHTTPFirstTry(b *testing.B) {
	for _, s := range httpSetups {
		b.Run(s.name, func(b *testing.B) { runHTTP(b, s, 0) })
	}
}

// BenchmarkHTTP503503200 is a GET on loopback answered 503, 503, then 200,
// with zero waits: the figure is the libraries' bookkeeping, the drains of
// the two 503 bodies and three round trips on one connection.
func BenchmarkHTTP503503200(b *testing.B) {
	for _, s := range httpSetups {
		b.Run(s.name, func(b *testing.B) { runHTTP(b, s, 2) })
	}
}

// TestHTTPSetups_doWhatTheBenchmarksSay checks that every HTTP setup sends
// 3 requests for a 503, 503, 200 sequence on one connection, and 1 for a
// first-try 200, and ends with the 200.
func TestHTTPSetups_doWhatTheBenchmarksSay(t *testing.T) {
	for _, s := range httpSetups {
		for failures, want := range map[int]int64{0: 1, 2: 3} {
			srv, requests, conns := cycleServer(failures)
			base := &http.Transport{}
			c := s.build(t, base)
			for range 3 {
				before := requests.Load()
				req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
				require.NoError(t, err)
				getOK(t, c, req)
				assert.Equal(t, want, requests.Load()-before, "%s, %d failures", s.name, failures)
			}
			assert.Equal(t, int64(1), conns.Load(), "%s, %d failures: one connection", s.name, failures)
			base.CloseIdleConnections()
			srv.Close()
		}
	}
}

// BenchmarkHTTP503503200Interleaved runs the three setups of
// BenchmarkHTTP503503200 in turn in each iteration (rotating which goes
// first), so that all meet the same load on a shared machine, and reports
// each one's ns per request and the ratios; allocations are
// BenchmarkHTTP503503200's.
func BenchmarkHTTP503503200Interleaved(b *testing.B) {
	type lane struct {
		c   *http.Client
		req *http.Request
		t   time.Duration
	}
	lanes := make([]*lane, len(httpSetups))
	for i, s := range httpSetups {
		srv, _, _ := cycleServer(2)
		defer srv.Close()
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
		require.NoError(b, err)
		lanes[i] = &lane{c: s.build(b, base), req: req}
		getOK(b, lanes[i].c, req)
	}
	n := 0
	for b.Loop() {
		for j := range lanes {
			l := lanes[(n+j)%len(lanes)]
			start := time.Now()
			getOK(b, l.c, l.req)
			l.t += time.Since(start)
		}
		n++
	}
	for i, s := range httpSetups {
		b.ReportMetric(float64(lanes[i].t.Nanoseconds())/float64(n), s.name+"-ns/req")
	}
	b.ReportMetric(float64(lanes[1].t)/float64(lanes[0].t), "Steadfast/Plain")
	b.ReportMetric(float64(lanes[1].t)/float64(lanes[2].t), "Steadfast/RetryableHTTP")
}
