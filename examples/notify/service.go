package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadfast-go/retry/retryhttp"
)

// latencyHeader carries the simulated latency of an answer: the service
// answers at once, in real time, and says how long the answer would have
// taken. The client moves the job's virtual clock on by it (see
// virtualNetwork), so an answer slower than the attempt timeout is a
// timeout.
const latencyHeader = "Simulated-Latency"

// timeoutLatency is how late the service answers when it "times out":
// later than any attempt timeout.
const timeoutLatency = time.Minute

// validUser is the form of a user ID the service knows.
var validUser = regexp.MustCompile(`^u[0-9]{8}$`)

// replayedHeader marks an answer the service gave from a request's
// Idempotency-Key, not by delivering, as Stripe's Idempotent-Replayed does.
const replayedHeader = "Idempotent-Replayed"

// timeHeader carries the virtual time at which a request is sent (Unix
// nanoseconds), by which the service measures its rate: the requests
// reach it in the timeline's order, so what it refuses depends on the
// flags alone.
const timeHeader = "Simulated-Time"

// overRateHeader marks a 429 of the rate, apart from the ones the
// service answers at random (-fail-rate), for the summary to count.
const overRateHeader = "Simulated-Over-Rate"

// limitedLatency is how long a 429 takes: the rate limiter answers
// before the service looks at the request.
const limitedLatency = 10 * time.Millisecond

// service is the simulated third-party push service. Whether an attempt
// fails, how, and how long it takes are a pure function of the seed, the
// job ID and the attempt's number for that job (the requests the service
// has seen with that ID), never of the order in which workers send, so a
// run is the same whatever the scheduling.
//
// Over its rate (-service-rate, per second of virtual time) it answers
// 429 with a Retry-After in whole seconds, as real APIs do, before it
// looks at the request: such a request is not one of the job's attempts
// for the failures above, which still include a 429 at random (a fifth
// of them).
//
// With dedup (the default; -service-dedup=false turns it off) it honours
// the Idempotency-Key header as Stripe's API does: a request whose key it
// has delivered before is answered as that one was (200, with
// Idempotent-Replayed: true) and not delivered again. It keeps the keys
// in memory, for the process's life: unlike Stripe's, its memory does not
// outlive a crash (-crash-at), where the idempotency store alone keeps a
// rerun from sending twice. A request the service fails before looking
// at it (the transient failures) records no key, so its retry delivers.
type service struct {
	seed     uint64
	failRate float64
	dedup    bool
	rate     *virtualRate // nil: no rate (-river and -resend run in real time)

	mu        sync.Mutex
	attempts  map[string]int  // requests seen per job ID
	delivered map[string]int  // notifications delivered per job ID
	keys      map[string]bool // Idempotency-Keys of the delivered requests, with dedup
	log       *os.File        // the record of deliveries; nil for none
	// shared, with -river, keeps the record of deliveries (and the
	// dedup by key) in PostgreSQL, for every process of the run: the
	// one push service they all send to.
	shared *sharedDeliveries

	requests   atomic.Int64
	deliveries atomic.Int64
	duplicates atomic.Int64 // deliveries of a job delivered before
	deduped    atomic.Int64 // requests answered from their key, not delivered
	limited    atomic.Int64 // requests answered 429: over the rate
}

// newService returns the push service; dedup makes it deduplicate by the
// Idempotency-Key header, logPath (if not "") is its record of deliveries.
func newService(seed uint64, failRate float64, dedup bool, logPath string) (*service, error) {
	s := &service{seed: seed, failRate: failRate, dedup: dedup, attempts: map[string]int{}, delivered: map[string]int{}, keys: map[string]bool{}}
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("the deliveries record: %w", err)
		}
		s.log = f
	}
	return s, nil
}

// rng returns the random stream of attempt n of job id.
func (s *service) rng(id string, n int) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(id))
	return rand.New(rand.NewPCG(s.seed, h.Sum64()+uint64(n)*0x9e3779b97f4a7c15))
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/push" {
		http.NotFound(w, r)
		return
	}
	var j job
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&j); err != nil || j.ID == "" {
		answer(w, http.StatusBadRequest, 0, "malformed request")
		return
	}
	s.requests.Add(1)
	if wait, ok := s.admit(r); !ok {
		s.limited.Add(1)
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		w.Header().Set(overRateHeader, "true")
		answer(w, http.StatusTooManyRequests, limitedLatency, "rate limited")
		return
	}
	s.mu.Lock()
	s.attempts[j.ID]++
	n := s.attempts[j.ID]
	s.mu.Unlock()

	rng := s.rng(j.ID, n)
	latency := time.Duration(20+rng.IntN(130)) * time.Millisecond
	if rng.Float64() < s.failRate {
		// Overloaded: the request fails before the service looks at it.
		switch k := rng.Float64(); {
		case k < 0.35:
			answer(w, http.StatusGatewayTimeout, timeoutLatency, "timeout")
		case k < 0.65:
			answer(w, http.StatusServiceUnavailable, latency, "unavailable")
		case k < 0.80:
			answer(w, http.StatusBadGateway, latency, "bad gateway")
		default:
			w.Header().Set("Retry-After", strconv.Itoa(1+rng.IntN(3)))
			answer(w, http.StatusTooManyRequests, latency, "rate limited")
		}
		return
	}
	switch {
	case j.Message == "":
		answer(w, http.StatusBadRequest, latency, "empty message")
	case !validUser.MatchString(j.UserID):
		answer(w, http.StatusNotFound, latency, "unknown user")
	default:
		delivered, err := s.deliverShared(r.Context(), j.ID, r.Header.Get(retryhttp.IdempotencyKeyHeader))
		switch {
		case err != nil:
			answer(w, http.StatusServiceUnavailable, latency, "unavailable")
		case !delivered:
			w.Header().Set(replayedHeader, "true")
			answer(w, http.StatusOK, latency, "sent")
		default:
			answer(w, http.StatusOK, latency, "sent")
		}
	}
}

// admit takes a request's room in the rate, at the virtual time it
// carries; over the rate it returns how long until there is room. A
// request without a virtual time, or a service without a rate, is
// admitted.
func (s *service) admit(r *http.Request) (time.Duration, bool) {
	if s.rate == nil {
		return 0, true
	}
	ns, err := strconv.ParseInt(r.Header.Get(timeHeader), 10, 64)
	if err != nil {
		return 0, true
	}
	return s.rate.admit(time.Duration(ns))
}

// virtualRate is a GCRA (a token bucket kept as one time) on the virtual
// time the requests carry, which the timeline's order makes
// non-decreasing: perSecond requests a second, a second's worth at once.
type virtualRate struct {
	mu       sync.Mutex
	interval time.Duration // between two requests at the rate
	window   time.Duration // how far ahead of now tat may run: the burst
	tat      time.Duration // the theoretical arrival time of the next request
}

// newVirtualRate returns the rate of perSecond requests a second; nil
// for 0, no rate.
func newVirtualRate(perSecond int) *virtualRate {
	if perSecond <= 0 {
		return nil
	}
	interval := time.Second / time.Duration(perSecond)
	return &virtualRate{interval: interval, window: time.Duration(perSecond) * interval}
}

// admit takes a request's room at now (virtual, since the Unix epoch),
// or returns how long until there is room.
func (v *virtualRate) admit(now time.Duration) (time.Duration, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	next := max(v.tat, now) + v.interval
	if next-now > v.window {
		return next - v.window - now, false
	}
	v.tat = next
	return 0, true
}

// deliverShared is deliver, with the record of deliveries in PostgreSQL
// when the service has one (-river). The record says whether the job was
// delivered before, by this process or another one; the counts of the
// service are this process's.
func (s *service) deliverShared(ctx context.Context, id, key string) (bool, error) {
	if s.shared == nil {
		return s.deliver(id, key), nil
	}
	n, err := s.shared.deliver(ctx, id, s.dedup && key != "")
	if err != nil {
		return false, err
	}
	if n == 0 {
		s.deduped.Add(1)
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deliveries.Add(1)
	if n > 1 {
		s.duplicates.Add(1)
	}
	s.logDelivery(id)
	return true, nil
}

// deliver delivers the notification of job id, unless the service
// dedups and key (the request's Idempotency-Key; "" for none) was
// delivered before; it reports whether it delivered. delivered counts
// real deliveries only, so a job's count above 1 is a notification its
// user got twice.
func (s *service) deliver(id, key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dedup && key != "" {
		if s.keys[key] {
			s.deduped.Add(1)
			return false
		}
		s.keys[key] = true
	}
	s.delivered[id]++
	s.deliveries.Add(1)
	if s.delivered[id] > 1 {
		s.duplicates.Add(1)
	}
	s.logDelivery(id)
	return true
}

// logDelivery appends id to the record of deliveries, if any; s.mu must
// be held.
func (s *service) logDelivery(id string) {
	if s.log != nil {
		// One write per line, unbuffered: the kernel has it even if the
		// process exits the next instant.
		if _, err := s.log.WriteString(id + "\n"); err != nil {
			fmt.Fprintln(os.Stderr, "notify: the deliveries record:", err)
		}
	}
}

func answer(w http.ResponseWriter, code int, latency time.Duration, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(latencyHeader, latency.String())
	w.WriteHeader(code)
	fmt.Fprintf(w, "{\"status\":%q}\n", status)
}

// start serves s on a loopback port and returns its base URL and a
// function that stops it.
func (s *service) start() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("the push service: %w", err)
	}
	stop := serve(ln, s, "the push service")
	return "http://" + ln.Addr().String(), func() {
		stop()
		if s.log != nil {
			s.log.Close()
		}
	}, nil
}

// serve serves h on ln until the function it returns is called.
func serve(ln net.Listener, h http.Handler, what string) (stop func()) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "notify: %s: %v\n", what, err)
		}
	}()
	return func() {
		srv.Close()
		<-done
	}
}
