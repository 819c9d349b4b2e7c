package retryhttp

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/steadfast-go/retry"
)

const (
	// DefaultBodyLimit is the largest request body, in bytes, that a
	// Transport copies to replay when the request has no GetBody: 1 MiB.
	// See [WithBodyLimit].
	DefaultBodyLimit = 1 << 20
	// DrainLimit is how many bytes of a retried attempt's response body
	// are read, 64 KiB: a body that fits is read to its end, so its
	// connection is reused; a longer one is closed unread past the limit,
	// which closes its connection.
	DrainLimit = 64 << 10
	// DefaultReadAheadTimeout bounds reading ahead the body of a
	// retryable status (up to DrainLimit), 1s: a body that stalls cannot
	// hold the call, and its status stands. See [WithReadAheadTimeout].
	DefaultReadAheadTimeout = time.Second
	// IdempotencyKeyHeader is the request header, from the IETF httpapi
	// Idempotency-Key draft, that makes any request retryable, and in
	// which a Transport sends a request's key downstream (see
	// [WithIdempotencyKeyHeader]).
	IdempotencyKeyHeader = "Idempotency-Key"
)

// defaultStatuses are retried unless WithStatuses says otherwise: the
// statuses that say the server did not do the work, or asks to come back.
var defaultStatuses = [...]int{
	http.StatusRequestTimeout,      // 408
	http.StatusTooManyRequests,     // 429
	http.StatusInternalServerError, // 500
	http.StatusBadGateway,          // 502
	http.StatusServiceUnavailable,  // 503
	http.StatusGatewayTimeout,      // 504
}

// defaultMethods are idempotent by RFC 9110 §9.2.2.
var defaultMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
	http.MethodPut, http.MethodDelete,
}

// Option configures a [Transport]. Options are applied in order by
// [NewTransport] or [NewClient]; a later option overrides an earlier one of
// the same kind.
type Option func(*settings)

// settings holds what the options set.
type settings struct {
	err        error
	statuses   []int
	permanent  []int
	methods    []string
	bodyLimit  int64
	readAhead  time.Duration
	keys       bool
	keyHeader  string // canonical
	name       func(*http.Request) string
	statusesOK bool // statuses was set, possibly to none
}

func (s *settings) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("%w: retryhttp: "+format, append([]any{retry.ErrInvalidOption}, args...)...)
	}
}

// WithStatuses sets the response statuses that an idempotent request is
// retried on, replacing the default 408, 429, 500, 502, 503 and 504. Each
// code must be from 400 to 599; none at all means no status is retried
// (connection errors still are). Default: the six above.
func WithStatuses(codes ...int) Option {
	codes = append([]int(nil), codes...)
	return func(s *settings) {
		if s.validStatuses("WithStatuses", "retried", codes) {
			s.statuses, s.statusesOK = codes, true
		}
	}
}

// WithPermanentStatuses sets the response statuses that are permanent
// failures, such as 400 or 404 from an API whose requests will fail the
// same way every time. A request that gets one is not retried, whatever
// its method, and ends for the Retrier as a permanent failure
// ([retry.OutcomePermanent]): its observers, dead letters and
// idempotency store see a failed call whose last error is a
// [*StatusError] with Permanent set ("retryhttp: permanent status 404 Not
// Found"). RoundTrip still returns the response, body unread, with a nil
// error, as for the last of the retryable statuses, unless the call's
// dead letter was not recorded (see the package documentation,
// Responses).
//
// Each code must be from 400 to 599 and must not also be given to
// [WithStatuses]; a code of the default retried set named here is no
// longer retried. A later WithPermanentStatuses replaces an earlier one.
// Default: none, so every status that is not retried is a success to the
// Retrier.
func WithPermanentStatuses(codes ...int) Option {
	codes = append([]int(nil), codes...)
	return func(s *settings) {
		if s.validStatuses("WithPermanentStatuses", "permanent failures", codes) {
			s.permanent = codes
		}
	}
}

// validStatuses reports whether every code is from 400 to 599, the
// statuses that are failures, and records the error for the first that
// is not.
func (s *settings) validStatuses(option, what string, codes []int) bool {
	for _, c := range codes {
		if c < 400 || c > 599 {
			s.fail("%s(%d): only statuses from 400 to 599 can be %s", option, c, what)
			return false
		}
	}
	return true
}

// WithMethods sets the methods that are retried without an Idempotency-Key
// header, replacing the default GET, HEAD, OPTIONS, TRACE, PUT and DELETE.
// Add POST or PATCH only when every such request of this Transport is safe
// to repeat. Methods are case-sensitive, as in HTTP; none may be empty.
// None at all means no method is retried without a key (a request that
// failed before it had a connection still is, as is one with a key).
// Default: the six above.
func WithMethods(methods ...string) Option {
	methods = append(make([]string, 0, len(methods)), methods...) // not nil: nil is the default set
	return func(s *settings) {
		for _, m := range methods {
			if m == "" {
				s.fail("WithMethods: a method is empty")
				return
			}
		}
		s.methods = methods
	}
}

// WithIdempotencyKeys makes the Transport retry every request whose
// method is not retried by itself (see [WithMethods]) with a key in the
// Idempotency-Key header ([WithIdempotencyKeyHeader]), sent unchanged on
// every attempt of that request: the request's own, else the key in its
// context ([retry.ContextWithIdempotencyKey]), which the Transport sends
// anyway but retries on only with this option, else a generated one, a
// random UUID. Use it only with servers that honour the header. The
// caller's request is not changed: the key is on the response's Request.
// Default: off.
func WithIdempotencyKeys() Option {
	return func(s *settings) { s.keys = true }
}

// WithIdempotencyKeyHeader sets the request header that carries a
// request's idempotency key, replacing [IdempotencyKeyHeader]
// ("Idempotency-Key"), for a server that dedupes on another one. The
// Transport reads the caller's key from it, and sends in it the key of a
// request keyed by its context or by [WithIdempotencyKeys]; it reads and
// writes no other header. name must be a valid header name (an HTTP
// token); it is canonicalized, as http.Header.Set does. Default:
// "Idempotency-Key".
func WithIdempotencyKeyHeader(name string) Option {
	return func(s *settings) {
		if !validHeaderName(name) {
			s.fail("WithIdempotencyKeyHeader(%q): not a valid header name", name)
			return
		}
		s.keyHeader = http.CanonicalHeaderKey(name)
	}
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

// WithBodyLimit sets the largest request body, in bytes, that the
// Transport copies in memory so that a request without GetBody can be
// retried. A larger body is streamed once and not retried. n must not be
// negative; 0 means never copy. Default: [DefaultBodyLimit].
func WithBodyLimit(n int64) Option {
	return func(s *settings) {
		if n < 0 {
			s.fail("WithBodyLimit(%d): the limit must not be negative", n)
			return
		}
		s.bodyLimit = n
	}
}

// WithReadAheadTimeout sets how long the Transport reads ahead the body
// of a retryable status (up to [DrainLimit] bytes), which it does so that
// the connection can serve the next attempt, or the caller can still read
// the body when that response is the last. The time runs from the
// response's headers. A body that is not read to its end by then, one
// that stalls or trickles, is closed: the status stands (the next attempt
// follows, or the caller gets that response, whose body reads as what
// came and then an error saying it was cut), as when the Retrier's
// attempt timeout ([retry.WithAttemptTimeout]) cuts it, which it still
// does when it ends first. d must be above 0. Default:
// [DefaultReadAheadTimeout], 1s.
func WithReadAheadTimeout(d time.Duration) Option {
	return func(s *settings) {
		if d <= 0 {
			s.fail("WithReadAheadTimeout(%v): the timeout must be above 0", d)
			return
		}
		s.readAhead = d
	}
}

// WithOperationName sets how a request is named for the Retrier's
// observers and dead letters. Names label metrics, so keep them few and
// free of identifiers: never return a raw URL path or query. f must be safe
// for concurrent use and must not be nil. The Transport keeps a prepared
// Retrier for each of the first 256 names it sees (and for the default
// names too); later names cost an allocation per request. It wins over
// the Retrier's own name. Default: the Retrier's name when it has one
// ([retry.WithName]), else "METHOD host", such as "GET
// api.example.com:8443" (an empty method is GET, as net/http sends it).
func WithOperationName(f func(*http.Request) string) Option {
	return func(s *settings) {
		if f == nil {
			s.fail("WithOperationName(nil): the function must not be nil")
			return
		}
		s.name = f
	}
}
