package retryhttp

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/internal/isnil"
)

const (
	// DefaultBodyLimit is the largest request body, in bytes, that a
	// Transport copies to replay when the request has no GetBody: 1 MiB.
	// See [Options.BodyLimit].
	DefaultBodyLimit = 1 << 20
	// NoBodyCopy, given as [Options.BodyLimit], makes the Transport never
	// copy a request body: a request without GetBody is sent once. It is
	// how to say a limit of 0, since BodyLimit 0 means DefaultBodyLimit.
	NoBodyCopy = -1
	// DrainLimit is how many bytes of a retried attempt's response body
	// are read, 64 KiB: a body that fits is read to its end, so its
	// connection is reused; a longer one is closed unread past the limit,
	// which closes its connection.
	DrainLimit = 64 << 10
	// DefaultReadAheadTimeout bounds reading ahead the body of a
	// retryable status (up to DrainLimit), 1s: a body that stalls cannot
	// hold the call, and its status stands. See
	// [Options.ReadAheadTimeout].
	DefaultReadAheadTimeout = time.Second
	// IdempotencyKeyHeader is the request header, from the IETF httpapi
	// Idempotency-Key draft, that makes any request retryable, and in
	// which a Transport sends a request's key downstream (see
	// [Options.IdempotencyKeyHeader]).
	IdempotencyKeyHeader = "Idempotency-Key"
)

// defaultStatuses are retried unless Options.Statuses says otherwise: the
// statuses that say the server did not do the work, or asks to come back.
var defaultStatuses = [...]int{
	http.StatusRequestTimeout,      // 408
	http.StatusTooManyRequests,     // 429
	http.StatusInternalServerError, // 500
	http.StatusBadGateway,          // 502
	http.StatusServiceUnavailable,  // 503
	http.StatusGatewayTimeout,      // 504
}

// Options configures [NewTransport] and [NewClient]. The zero value, like
// a nil *Options, gives the defaults; a zero field means its default.
// Three fields have a zero that differs from their default and a way to
// say it: Statuses and Methods take an empty slice that is not nil
// ([]int{}, []string{}) for none, and BodyLimit takes [NoBodyCopy].
type Options struct {
	// Base sends each attempt. When it is an *http.Transport
	// (http.DefaultTransport is one) the Transport tells from httptrace's
	// GotConn whether a failed request was sent; any other base (a
	// wrapper, an HTTP/2 or HTTP/3 transport, an in-process fake) may not
	// fire GotConn, so there only a failed dial or proxy connect counts as
	// unsent (see [NewTransport]). It must not hold a nil pointer.
	// Default (nil): http.DefaultTransport.
	Base http.RoundTripper
	// Statuses are the response statuses that an idempotent request is
	// retried on, each from 400 to 599, replacing the default set. An
	// empty slice that is not nil, []int{}, means no status is retried
	// (connection errors still are). NewTransport copies the slice.
	// Default (nil): 408, 429, 500, 502, 503 and 504.
	Statuses []int
	// PermanentStatuses are the response statuses that are permanent
	// failures, such as 400 or 404 from an API whose requests will fail
	// the same way every time. A request that gets one is not retried,
	// whatever its method, and ends for the Retrier as a permanent
	// failure ([retry.OutcomePermanent]): its observers, dead letters and
	// idempotency store see a failed call whose last error is a
	// [*StatusError] with Permanent set ("retryhttp: permanent status 404
	// Not Found"). RoundTrip still returns the response, body unread, with
	// a nil error, as for the last of the retryable statuses, unless the
	// call's dead letter was not recorded (see the package documentation,
	// Responses). Each code must be from 400 to 599 and must not also be
	// in Statuses; a code of the default retried set named here is no
	// longer retried. Default (nil): none, so every status that is not
	// retried is a success to the Retrier.
	PermanentStatuses []int
	// Methods are the methods that are retried without an
	// Idempotency-Key header, replacing the default set. Add POST or
	// PATCH only when every such request of this Transport is safe to
	// repeat. Methods are case-sensitive, as in HTTP; none may be empty.
	// An empty slice that is not nil, []string{}, means no method is
	// retried without a key (a request that failed before it had a
	// connection still is, as is one with a key). NewTransport copies the
	// slice. Default (nil): GET, HEAD, OPTIONS, TRACE, PUT and DELETE.
	Methods []string
	// IdempotencyKeys makes the Transport retry every request whose
	// method is not retried by itself (see Methods) with a key in the
	// Idempotency-Key header (IdempotencyKeyHeader), sent unchanged on
	// every attempt of that request: the request's own, else the key in
	// its context ([retry.ContextWithIdempotencyKey]), which the Transport
	// sends anyway but retries on only with this option, else a generated
	// one, a random UUID. Use it only with servers that honour the header.
	// The caller's request is not changed: the key is on the response's
	// Request. Default: false.
	IdempotencyKeys bool
	// IdempotencyKeyHeader is the request header that carries a
	// request's idempotency key, for a server that dedupes on another one
	// than Idempotency-Key. The Transport reads the caller's key from it,
	// and sends in it the key of a request keyed by its context or by
	// IdempotencyKeys; it reads and writes no other header. It must be a
	// valid header name (an HTTP token); it is canonicalized, as
	// http.Header.Set does. Default (""): [IdempotencyKeyHeader],
	// "Idempotency-Key".
	IdempotencyKeyHeader string
	// BodyLimit is the largest request body, in bytes, that the
	// Transport copies in memory so that a request without GetBody can be
	// retried. A larger body is streamed once and not retried. It must
	// not be negative, or is [NoBodyCopy] to never copy. Default (0):
	// [DefaultBodyLimit], 1 MiB.
	BodyLimit int64
	// ReadAheadTimeout is how long the Transport reads ahead the body of
	// a retryable status (up to [DrainLimit] bytes), which it does so that
	// the connection can serve the next attempt, or the caller can still
	// read the body when that response is the last. The time runs from
	// the response's headers. A body that is not read to its end by then,
	// one that stalls or trickles, is closed: the status stands (the next
	// attempt follows, or the caller gets that response, whose body reads
	// as what came and then an error saying it was cut), as when the
	// Retrier's attempt timeout ([retry.WithAttemptTimeout]) cuts it,
	// which it still does when it ends first. It must not be negative.
	// Default (0): [DefaultReadAheadTimeout], 1s.
	ReadAheadTimeout time.Duration
	// OperationName names a request for the Retrier's observers and dead
	// letters. Names label metrics, so keep them few and free of
	// identifiers: never return a raw URL path or query. It must be safe
	// for concurrent use. The Transport keeps a prepared Retrier for each
	// of the first 256 names it sees (and for the default names too);
	// later names cost an allocation per request. It wins over the
	// Retrier's own name. Default (nil): the Retrier's name when it has
	// one ([retry.WithName]), else "METHOD host", such as "GET
	// api.example.com:8443" (an empty method is GET, as net/http sends
	// it).
	OperationName func(*http.Request) string
	// RateLimitResetHeaders are the headers of a 429 that say when the
	// server's rate limit resets, such as "X-RateLimit-Reset", read in
	// order when the 429 has no valid Retry-After: the first with a valid
	// value ([ParseRateLimitReset]: seconds from now below 1e9, else a
	// Unix time in seconds) is the server's delay, as Retry-After's is. A
	// 503 reads Retry-After only. Each must be a valid header name, other
	// than Retry-After; they are canonicalized. Default (nil): none.
	RateLimitResetHeaders []string
	// Partition, if set, names the partition of the downstream a request
	// belongs to ([PartitionByHost]: its host), which the Transport puts
	// in the context it gives the Retrier ([overload.WithPartition]), so
	// that a Partitioned [overload.Pause] or [overload.Rate] of the
	// Retrier keeps a state per partition: a 429 from one host pauses
	// that host's requests only. "" is the partition of requests without
	// one. The key is never written in this package's errors, and the
	// library's observers (retryslog, retryprom, retryotel) do not record
	// it. It must be safe for concurrent use. Default (nil): the
	// request's context's own partition, if any.
	Partition func(*http.Request) string
}

// PartitionByHost is an [Options.Partition] that partitions by the host
// (and port, if the URL has one) a request is sent to, its URL's Host in
// lower case: one partition per downstream host behind one Transport.
func PartitionByHost(req *http.Request) string { return strings.ToLower(req.URL.Host) }

// settings are Options checked, with the defaults filled in: what a
// Transport is built with.
type settings struct {
	base      http.RoundTripper
	statuses  [200]*StatusError // index code-400; nil: a success
	methods   []string          // nil: the default methods; empty: none
	bodyLimit int64
	readAhead time.Duration // bounds hold's read of a retryable status's body
	keys      bool
	keyHeader string // canonical: the header of a request's idempotency key
	name      func(*http.Request) string
	resets    []string // canonical: a 429's rate limit reset headers
	partition func(*http.Request) string
}

// invalid returns an error wrapping [retry.ErrInvalidOption] that names
// the problem.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: retryhttp: "+format, append([]any{retry.ErrInvalidOption}, args...)...)
}

// settings checks o, which may be nil, and fills in the defaults.
func (o *Options) settings() (settings, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	s := settings{
		base:      opts.Base,
		bodyLimit: opts.BodyLimit,
		readAhead: opts.ReadAheadTimeout,
		keys:      opts.IdempotencyKeys,
		keyHeader: IdempotencyKeyHeader,
		name:      opts.OperationName,
		partition: opts.Partition,
	}
	switch {
	case s.base == nil:
		s.base = http.DefaultTransport
	case isnil.Is(s.base):
		return s, invalid("Options.Base (%T)(nil) is a nil pointer, which cannot send (leave Base nil for http.DefaultTransport)", s.base)
	}
	if err := validStatuses("Statuses", "retried", opts.Statuses); err != nil {
		return s, err
	}
	if err := validStatuses("PermanentStatuses", "permanent failures", opts.PermanentStatuses); err != nil {
		return s, err
	}
	var err error
	if s.statuses, err = statusTable(opts.Statuses, opts.PermanentStatuses); err != nil {
		return s, err
	}
	if opts.Methods != nil {
		for _, m := range opts.Methods {
			if m == "" {
				return s, invalid("Options.Methods %q: a method is empty", opts.Methods)
			}
		}
		s.methods = append(make([]string, 0, len(opts.Methods)), opts.Methods...) // not nil: nil is the default set
	}
	if h := opts.IdempotencyKeyHeader; h != "" {
		if !validHeaderName(h) {
			return s, invalid("Options.IdempotencyKeyHeader %q: not a valid header name", h)
		}
		s.keyHeader = http.CanonicalHeaderKey(h)
	}
	for _, h := range opts.RateLimitResetHeaders {
		switch {
		case !validHeaderName(h):
			return s, invalid("Options.RateLimitResetHeaders: %q is not a valid header name", h)
		case http.CanonicalHeaderKey(h) == "Retry-After":
			return s, invalid("Options.RateLimitResetHeaders: Retry-After is always read first, on 429 and 503; list only the headers to read after it")
		}
		s.resets = append(s.resets, http.CanonicalHeaderKey(h))
	}
	switch {
	case s.bodyLimit == 0:
		s.bodyLimit = DefaultBodyLimit
	case s.bodyLimit == NoBodyCopy:
		s.bodyLimit = 0
	case s.bodyLimit < 0:
		return s, invalid("Options.BodyLimit %d: the limit must not be negative (NoBodyCopy, -1, never copies)", s.bodyLimit)
	}
	switch {
	case s.readAhead == 0:
		s.readAhead = DefaultReadAheadTimeout
	case s.readAhead < 0:
		return s, invalid("Options.ReadAheadTimeout %v: the timeout must not be negative", s.readAhead)
	}
	return s, nil
}

// validStatuses returns an error for the first code that is not from 400
// to 599, the statuses that are failures.
func validStatuses(field, what string, codes []int) error {
	for _, c := range codes {
		if c < 400 || c > 599 {
			return invalid("Options.%s: %d: only statuses from 400 to 599 can be %s", field, c, what)
		}
	}
	return nil
}

// statusTable returns the error of each status the options make a
// failure: the retried ones, and the permanent ones, which win over the
// default retried set but not over Statuses. The codes are valid.
func statusTable(retried, permanent []int) (table [200]*StatusError, err error) {
	codes := defaultStatuses[:]
	if retried != nil {
		codes = retried
	}
	for _, c := range codes {
		table[c-400] = &StatusError{StatusCode: c}
	}
	for _, c := range permanent {
		if retried != nil && table[c-400] != nil && !table[c-400].Permanent {
			return table, invalid("status %d is in both Options.Statuses and Options.PermanentStatuses; a status is either retried or a permanent failure", c)
		}
		table[c-400] = &StatusError{StatusCode: c, Permanent: true}
	}
	return table, nil
}

// validHeaderName reports whether name is an HTTP token (RFC 9110
// §5.6.2), the form of a header name.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
