package retryhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/steadfast-go/retry/retryhttp"
)

// getOnce sends one GET and reads its small body to the end, as a caller
// that reuses connections does.
func getOnce(tb testing.TB, c *http.Client, req *http.Request) {
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("status %d", resp.StatusCode)
	}
}

// okServer answers every request with 200 and a two-byte body.
func okServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	}))
}

// BenchmarkGET compares a successful GET on loopback through a plain
// http.Client with the same GET through a Transport on the same kind of
// base transport. Each sub-benchmark has its own base and connection.
func BenchmarkGET(b *testing.B) {
	srv := okServer()
	defer srv.Close()
	for _, name := range []string{"plain", "retryhttp"} {
		b.Run(name, func(b *testing.B) {
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			c := &http.Client{Transport: base}
			if name == "retryhttp" {
				tr, err := retryhttp.NewTransport(fast(b, 3), &retryhttp.Options{Base: base})
				if err != nil {
					b.Fatal(err)
				}
				c = &http.Client{Transport: tr}
			}
			req := newRequest(b, context.Background(), http.MethodGet, srv.URL, nil)
			getOnce(b, c, req) // open the connection
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				getOnce(b, c, req)
			}
		})
	}
}

// stub is an in-process base transport that answers 200 at once, so that
// BenchmarkOverhead measures the Transport's own cost without the network.
type stub struct{}

func (stub) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

// BenchmarkOverhead calls RoundTrip for a first-try GET on the stub
// directly ("plain") and through a Transport on the stub: the difference
// is the Transport's own cost per request.
func BenchmarkOverhead(b *testing.B) {
	for _, name := range []string{"plain", "retryhttp"} {
		b.Run(name, func(b *testing.B) {
			var rt http.RoundTripper = stub{}
			if name == "retryhttp" {
				tr, err := retryhttp.NewTransport(fast(b, 3), &retryhttp.Options{Base: rt})
				if err != nil {
					b.Fatal(err)
				}
				rt = tr
			}
			req := newRequest(b, context.Background(), http.MethodGet, "http://example.test/", nil)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatal(resp, err)
				}
			}
		})
	}
}

// BenchmarkGETInterleaved sends, in each iteration, one GET through the
// plain client and one through the Transport, timing each, so that both
// meet the same load on a shared machine. It reports each one's ns per GET
// and their ratio; allocations are BenchmarkGET's.
func BenchmarkGETInterleaved(b *testing.B) {
	srv := okServer()
	defer srv.Close()
	plainBase, oursBase := &http.Transport{}, &http.Transport{}
	defer plainBase.CloseIdleConnections()
	defer oursBase.CloseIdleConnections()
	tr, err := retryhttp.NewTransport(fast(b, 3), &retryhttp.Options{Base: oursBase})
	if err != nil {
		b.Fatal(err)
	}
	plain, ours := &http.Client{Transport: plainBase}, &http.Client{Transport: tr}
	req := newRequest(b, context.Background(), http.MethodGet, srv.URL, nil)
	getOnce(b, plain, req)
	getOnce(b, ours, req)
	var tPlain, tOurs time.Duration
	n := 0
	timed := func(c *http.Client) time.Duration {
		start := time.Now()
		getOnce(b, c, req)
		return time.Since(start)
	}
	for b.Loop() {
		if n%2 == 0 { // alternate which goes first
			tPlain += timed(plain)
			tOurs += timed(ours)
		} else {
			tOurs += timed(ours)
			tPlain += timed(plain)
		}
		n++
	}
	b.ReportMetric(float64(tPlain.Nanoseconds())/float64(n), "plain-ns/GET")
	b.ReportMetric(float64(tOurs.Nanoseconds())/float64(n), "retryhttp-ns/GET")
	b.ReportMetric(float64(tOurs)/float64(tPlain), "ratio")
}
