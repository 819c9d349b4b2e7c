package main

import (
	"fmt"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/steadfast-go/retry/retryprom"
)

// newMetrics registers the library's metrics (retryprom: calls by outcome,
// attempts, retries, calls in flight, waits, dead letters, durations) and
// the queue's length on reg.
func newMetrics(reg *prometheus.Registry, queueLen func() int) (*retryprom.Observer, error) {
	obs, err := retryprom.New(reg, retryprom.Options{})
	if err != nil {
		return nil, err
	}
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "notify_queue_length",
		Help: "Jobs in the queue, waiting for a worker.",
	}, func() float64 { return float64(queueLen()) })
	if err := reg.Register(g); err != nil {
		return nil, err
	}
	return obs, nil
}

// serveMetrics serves reg on addr at /metrics and returns the URL and a
// function that stops the server.
func serveMetrics(addr string, reg *prometheus.Registry) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("-metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	stop := serve(ln, mux, "metrics")
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/metrics", stop, nil
}
