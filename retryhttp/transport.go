package retryhttp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/internal/idemctx"
	"github.com/steadfast-go/retry/overload"
)

// Transport is an [http.RoundTripper] that sends each request through a
// [retry.Retrier]. Build one with [NewTransport] or [NewClient] (a nil or
// zero Transport's RoundTrip sends nothing and returns an error wrapping
// [retry.ErrInvalidOption]); like http.Transport, it is safe for
// concurrent use and meant to be built once and shared. With a Retrier
// that has [retry.WithHedge], it hedges the requests that are idempotent
// or keyed, and whose body can be sent again (see the package doc's
// "Hedged requests"); the others are sent one attempt at a time.
type Transport struct {
	settings
	names  names
	traced bool      // base is an *http.Transport, which fires httptrace's GotConn
	named  bool      // the Retrier has a name of its own (retry.WithName), which requests keep
	hedges bool      // the Retrier hedges (retry.WithHedge): idempotent requests are hedged
	calls  sync.Pool // of *call
}

// NewTransport returns a Transport that sends requests through opts.Base
// (default http.DefaultTransport) with all of r's policy; a nil r means
// the zero [retry.Retrier]'s defaults, a nil opts every [Options] default.
// A request that is not idempotent is retried only when surely unsent,
// which depends on the base (see the package doc's "What is retried"). An
// invalid option gives an error wrapping [retry.ErrInvalidOption].
func NewTransport(r *retry.Retrier, opts *Options) (*Transport, error) {
	s, err := opts.settings()
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = &retry.Retrier{}
	}
	_, traced := s.base.(*http.Transport)
	t := &Transport{settings: s, traced: traced, named: r.Name() != "", hedges: r.Hedges()}
	t.names.base = r
	t.calls.New = func() any {
		c := new(call)
		c.fn = c.attempt // bound once per pooled call, not per request
		return c
	}
	return t, nil
}

// NewClient returns an http.Client whose Transport is NewTransport(r,
// opts): opts.Base, http.DefaultTransport by default, with r's policy.
func NewClient(r *retry.Retrier, opts *Options) (*http.Client, error) {
	t, err := NewTransport(r, opts)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: t}, nil
}

// errNotBuilt is RoundTrip's error on a Transport that NewTransport did
// not build: a nil one, or the zero Transport, which has no Retrier.
var errNotBuilt = fmt.Errorf("%w: retryhttp: the Transport has no Retrier (a nil or zero Transport); build one with NewTransport or NewClient", retry.ErrInvalidOption)

// CloseIdleConnections closes the idle connections of the base transport,
// if it has such a method; http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	if t == nil {
		return
	}
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip sends req, again while the Retrier and the package's rules
// allow, and returns the final response or error. A status whose dead
// letter no sink stored gives an error matching
// [retry.ErrDeadLetterNotRecorded], the response closed. It does not
// change req, and closes its body, also on errors.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var err error
	switch {
	case req == nil || req.URL == nil:
		err = fmt.Errorf("%w: retryhttp: the request or its URL is nil", retry.ErrInvalidOption)
	case t == nil || t.names.base == nil:
		err = errNotBuilt
	}
	var r *retry.Retrier
	if err == nil {
		r, err = t.retrier(req)
	}
	if err != nil {
		if req != nil && req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	c := t.calls.Get().(*call)
	resp, err := c.run(t, r, req)
	*c = call{fn: c.fn, drain: c.drain[:0]}
	t.calls.Put(c)
	return resp, err
}

// Attempts returns how many times the Transport sent the request of resp:
// 1 for a response that did not come through a Transport, 0 for nil.
// After an error, errors.As finds a [*retry.Error] with the count.
func Attempts(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	if resp.Request != nil {
		if n, ok := resp.Request.Context().Value(attemptsKey{}).(int); ok {
			return n
		}
	}
	return 1
}

// attemptsKey is the context key of the attempt count on resp.Request.
type attemptsKey struct{}

// methodOf returns req's method, with "" read as GET, as net/http does.
func methodOf(req *http.Request) string {
	if req.Method == "" {
		return http.MethodGet
	}
	return req.Method
}

// idempotent reports whether method is retried without a key.
func (t *Transport) idempotent(method string) bool {
	if t.methods == nil {
		switch method {
		case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
			return true
		}
		return false
	}
	for _, m := range t.methods {
		if m == method {
			return true
		}
	}
	return false
}

// status returns the error of a retryable or permanent status, or nil.
func (t *Transport) status(code int) *StatusError {
	if code < 400 || code > 599 {
		return nil
	}
	return t.statuses[code-400]
}

// call is the state of one RoundTrip. Calls are pooled by the Transport,
// so nothing that outlives RoundTrip may point into one.
type call struct {
	fn func(context.Context) (outcome, error) // c.attempt, bound once

	t          *Transport
	req        *http.Request // as sent: the caller's, or a copy with a body or a key
	reqCtx     context.Context
	ctx        context.Context // given to the Retrier: reqCtx, maybe with a key
	idempotent bool
	hasBody    bool
	getBody    func() (io.ReadCloser, error)
	once       string // why the body cannot be sent again; "" if it can
	attempts   int
	hedged     bool // an attempt of a hedged call, with a call of its own (see hedgedCall)

	// The response of the last attempt when it had a retryable status,
	// its body read into drain, and what is left of it; or when it had a
	// permanent status, its body unread.
	last       *http.Response
	rest       io.ReadCloser // the unread rest of last's body; nil if read to its end
	restErr    error         // the read error that ended drain, if not io.EOF
	lastCancel context.CancelCauseFunc
	drain      []byte
}

// outcome is the value the Retrier returns. It encodes as the response's
// status only, for a Retrier with an idempotency store: a replayed
// outcome has no response.
type outcome struct {
	resp   *http.Response
	status int // of a replayed outcome
}

func (c *call) run(t *Transport, r *retry.Retrier, req *http.Request) (*http.Response, error) {
	c.t, c.req, c.reqCtx = t, req, req.Context()
	method := methodOf(req)
	c.idempotent = t.idempotent(method)
	// The key the downstream dedupes on, sent on every attempt: the
	// request's own header, else the caller's context key, which stays
	// the same when the caller redelivers the same work (a generated one
	// would not), else a generated one. Never the scoped store key below.
	// The caller's context key makes a request retryable only with
	// Options.IdempotencyKeys, which says the server honours keys.
	ctxKey, inCtx := retry.IdempotencyKeyFromContext(c.reqCtx)
	key, keyed := "", false
	if v := req.Header[t.keyHeader]; len(v) > 0 && v[0] != "" {
		key, keyed = v[0], true
	} else if ctxKey != "" && validHeaderValue(ctxKey) {
		key, keyed = ctxKey, t.keys
		c.req = withKey(req, t.keyHeader, key)
	} else if !c.idempotent && t.keys {
		key, keyed = newKey(), true
		c.req = withKey(req, t.keyHeader, key)
	}
	c.ctx = c.reqCtx
	if t.partition != nil {
		c.ctx = overload.WithPartition(c.ctx, t.partition(req))
	}
	if keyed {
		c.idempotent = true
	}
	if key != "" {
		// For a Retrier with an idempotency store: one claim per logical
		// request, scoped to its method, scheme, host and target, so that
		// a redirect http.Client follows with the same header is a
		// request of its own. A key the caller put in the request's
		// context wins, unless it is an enclosing idempotent call's:
		// package retry tells, and then takes this one.
		scoped := storeKey(method, req.URL.Scheme, req.URL.Host, req.URL.RequestURI(), key)
		if inCtx {
			c.ctx = idemctx.WithRequestKey(c.ctx, scoped)
		} else {
			c.ctx = retry.ContextWithIdempotencyKey(c.ctx, scoped)
		}
	}
	if err := c.prepareBody(); err != nil {
		return nil, err
	}

	var (
		out outcome
		err error
	)
	if t.hedges && c.idempotent && c.once == "" {
		out, err = c.hedge(r)
	} else {
		out, err = retry.DoValueOn(c.ctx, r, c.fn)
	}
	if c.attempts == 0 && c.req.Body != nil {
		c.req.Body.Close() // never handed to the base transport
	}
	switch {
	case err == nil && out.resp == nil:
		return nil, fmt.Errorf("retryhttp: %w: the request with this Idempotency-Key already completed with status %d; its response is not kept", retry.ErrReplayed, out.status)
	case err == nil:
		return c.mark(out.resp), nil
	case c.last != nil && c.reqCtx.Err() == nil && !errors.Is(err, retry.ErrDeadLetterNotRecorded):
		// The attempts ended on a retryable or permanent status: the
		// caller gets that response, as http.Client returns any status.
		// Not when no sink stored the dead letter: the caller, who still
		// has the work, must learn that, and a RoundTripper returns a
		// response or an error, not both.
		return c.mark(c.takeLast()), nil
	}
	c.dropLast()
	if out.resp != nil {
		// A response and an error: the request succeeded but the
		// idempotency store could not record it. The error must reach
		// the caller, so the response goes, closed.
		out.resp.Body.Close()
	}
	return nil, err
}

// mark sets resp.Request to the request as sent, with the attempt count
// when there was more than one attempt.
func (c *call) mark(resp *http.Response) *http.Response {
	if c.attempts > 1 {
		resp.Request = c.req.WithContext(context.WithValue(c.req.Context(), attemptsKey{}, c.attempts))
	} else {
		resp.Request = c.req
	}
	return resp
}

// attempt sends the request once. It is the function the Retrier runs.
func (c *call) attempt(ctx context.Context) (outcome, error) {
	c.dropLast()
	c.attempts++
	req := c.req
	if c.attempts > 1 && c.hasBody {
		b, err := c.getBody()
		if err != nil {
			return outcome{}, retry.Permanent(&notReplayable{why: "GetBody failed", err: err})
		}
		r := *c.req
		r.Body = b
		req = &r
	}
	var rb *recordingBody
	if c.hasBody && !cannotFail(req.Body) {
		// Errors of the body's own reads are told apart from the
		// network's: net/http may wrap them (in a *net.OpError, when the
		// connection's ReadFrom reads the body).
		if req == c.req {
			r := *c.req
			req = &r
		}
		rb = &recordingBody{ReadCloser: req.Body}
		req.Body = rb
	}
	var (
		cancel context.CancelCauseFunc
		stop   func() bool
	)
	if ctx.Done() != c.ctx.Done() {
		// The Retrier gave this attempt a timeout. Its context ends when
		// the attempt returns, but the final response's body must live
		// until it is closed: send on a context of our own, which the
		// attempt's may end only until the headers are in.
		// A hedged call's attempt's context also ends when another
		// attempt has won (retry.ErrHedgeLost): the request is aborted.
		var actx context.Context
		actx, cancel = context.WithCancelCause(c.reqCtx)
		if c.hedged {
			stop = context.AfterFunc(ctx, func() { cancel(attemptCause(ctx)) })
		} else {
			stop = context.AfterFunc(ctx, func() { cancel(errAttemptTimeout) })
		}
		req = req.WithContext(actx)
	}
	var conn *atomic.Int32
	if !c.idempotent && c.t.traced {
		// Whether the request asked for a connection and got one: one
		// that asked and got none sent nothing, and any method may be
		// retried. Only an *http.Transport is known to report both, and
		// only for its own protocols (a protocol registered with it, such
		// as an HTTP/3 one, reports neither): a failure counts as sent
		// unless the trace says otherwise, or it is a failed dial.
		conn = new(atomic.Int32)
		trace := &httptrace.ClientTrace{
			GetConn: func(string) { conn.Or(askedConn) },
			GotConn: func(httptrace.GotConnInfo) { conn.Or(gotConn) },
		}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	}

	resp, err := c.t.base.RoundTrip(req)
	switch {
	case err == nil && resp == nil:
		err = retry.Permanent(errNoResponse)
	case err == nil && resp.Body == nil:
		resp.Body = http.NoBody // as http.Client does for a RoundTripper that breaks the rule
	}
	if stop != nil && !stop() {
		// The attempt timed out (or the request's context ended) before
		// its response headers. Once they are in, the attempt timeout
		// no longer fails the attempt: it only cuts the read ahead of a
		// retryable status's body (see hold), whose status stands.
		if err == nil {
			resp.Body.Close()
		}
		cancel(nil)
		switch {
		case c.hedged && c.reqCtx.Err() == nil:
			err = attemptCause(ctx)
		case c.reqCtx.Err() == nil:
			err = errAttemptTimeout
		case err == nil, errors.Is(err, errAttemptTimeout):
			// The request's context ended: the attempt's context too,
			// whose AfterFunc may have won the race and given net/http
			// the timeout as its cause. A cancel is not a timeout.
			err = context.Cause(c.reqCtx)
		}
		resp = nil
	}
	var se *StatusError
	if err == nil {
		se = c.t.status(resp.StatusCode)
		if se != nil && c.hedged {
			// Its own copy: the call tells by it which attempt's
			// response goes with the error the Retrier ends on.
			own := *se
			se = &own
		}
		switch {
		case se == nil:
		case se.Permanent:
			c.keep(resp) // no attempt follows: the body is the caller's
		case c.idempotent && c.once == "":
			c.hold(ctx, resp)
		default:
			se = nil // not retried: the caller's response, a success
		}
	}
	if err != nil {
		if cancel != nil {
			cancel(nil)
		}
		return outcome{}, c.failed(err, conn, rb)
	}
	if se == nil {
		if cancel != nil {
			resp.Body = cancelOnClose(resp.Body, cancel)
		}
		return outcome{resp: resp}, nil
	}
	if c.rest == nil {
		if cancel != nil {
			cancel(nil) // the body is read and closed: nothing needs the context
		}
	} else {
		c.lastCancel = cancel
	}
	if se.Permanent {
		return outcome{}, retry.Permanent(se)
	}
	if d, ok := c.t.serverDelay(resp); ok {
		// The server's delay: the Retrier waits it, and an
		// OverloadOptions.Pause holds every request sharing it until then.
		return outcome{}, retry.After(se, d)
	}
	return outcome{}, se
}

// serverDelay returns the wait a 429 or 503 asks for: its Retry-After;
// else, on a 429, the first of Options.RateLimitResetHeaders with a valid
// value.
func (t *Transport) serverDelay(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return 0, false
	}
	if v := resp.Header["Retry-After"]; len(v) > 0 {
		if d, ok := ParseRetryAfter(v[0], time.Now()); ok {
			return d, true
		}
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		for _, h := range t.resets {
			if v := resp.Header[h]; len(v) > 0 {
				if d, ok := ParseRateLimitReset(v[0], time.Now()); ok {
					return d, true
				}
			}
		}
	}
	return 0, false
}

// failed turns a transport error into what the Retrier should do with it.
// The trace's marks of an attempt's connection.
const (
	askedConn = 1 << iota // GetConn: the Transport looked for a connection
	gotConn               // GotConn: it got one, and may have sent on it
)

func (c *call) failed(err error, conn *atomic.Int32, rb *recordingBody) error {
	err = withholdServerText(err)
	switch {
	case c.reqCtx.Err() != nil:
		return err // the Retrier stops with the context's cause
	case rb != nil && rb.failed() != nil:
		return retry.Permanent(&bodyReadError{body: rb.failed(), err: err})
	case c.once != "":
		return retry.Permanent(&notReplayable{why: c.once, err: err})
	case !retryable(err):
		return retry.Permanent(err)
	case c.idempotent, unsent(err), conn != nil && conn.Load() == askedConn:
		return err
	}
	// The request may have reached the server, which may have acted on it.
	return retry.Permanent(err)
}

// maxStoreKey is the longest idempotency key the retry package takes, in
// bytes (see retry.IdempotencyOptions.Key).
const maxStoreKey = 255

// storeKey returns the key, for a Retrier's idempotency store, of a request
// to target (its path and query) with the Idempotency-Key key:
// "http METHOD host TARGET KEY", where TARGET is the first 12 bytes of the
// SHA-256 of the scheme and target in unpadded base64url (16 characters;
// the scheme, so that a redirect from http to https is another request), when that fits
// in maxStoreKey bytes; otherwise "http sha256 " and the SHA-256 of that
// in hex (76 bytes), so that a key of any length fits whatever the host's.
// The path is hashed, never kept, as it can hold identifiers. The two
// forms cannot meet: after "http ", a readable one has at least three
// spaces, a hashed one has one.
func storeKey(method, scheme, host, target, key string) string {
	sum := sha256.Sum256([]byte(scheme + "://" + target))
	var t [16]byte
	base64.RawURLEncoding.Encode(t[:], sum[:12])
	s := "http " + method + " " + host + " " + string(t[:]) + " " + key
	if len(s) <= maxStoreKey {
		return s
	}
	sum = sha256.Sum256([]byte(s))
	return "http sha256 " + hex.EncodeToString(sum[:])
}

// newKey returns a random (version 4) UUID.
func newKey() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	hex.Encode(s[9:13], b[4:6])
	hex.Encode(s[14:18], b[6:8])
	hex.Encode(s[19:23], b[8:10])
	hex.Encode(s[24:], b[10:])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return string(s[:])
}

// withKey returns a copy of req with the key in header name (canonical);
// req and its header are not changed.
func withKey(req *http.Request, name, key string) *http.Request {
	r := *req
	r.Header = req.Header.Clone()
	if r.Header == nil {
		r.Header = make(http.Header, 1)
	}
	r.Header[name] = []string{key}
	return &r
}

// validHeaderValue reports whether net/http sends v as a header value:
// it has no control byte but tab. A context key that is not one is kept
// for the store only, as the request would fail.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < ' ' && b != '\t' || b == 0x7f {
			return false
		}
	}
	return true
}
