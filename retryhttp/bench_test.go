package retryhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

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
				tr, err := retryhttp.NewTransport(base, fast(b, 3))
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
