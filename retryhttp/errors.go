package retryhttp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"syscall"
)

// StatusError is the error of an attempt that got a retryable or a
// permanent ([Options.PermanentStatuses], marked [retry.Permanent])
// status: what observers see, and what errors.As finds in a
// [*retry.Error] when the call ended without that response. Its text
// names the status only; it is shared per status (a hedged request's
// attempt has a copy of its own), so do not change it.
type StatusError struct {
	// StatusCode is the response's status, such as 503.
	StatusCode int
	// Permanent is set for a status of Options.PermanentStatuses: the request
	// was not retried and the call failed for good.
	Permanent bool
}

// Error returns "retryhttp: retryable status 503 Service Unavailable", or
// for a permanent one "retryhttp: permanent status 404 Not Found".
func (e *StatusError) Error() string {
	kind := "retryhttp: retryable status "
	if e.Permanent {
		kind = "retryhttp: permanent status "
	}
	return kind + strconv.Itoa(e.StatusCode) + " " + http.StatusText(e.StatusCode)
}

// ErrBodyNotReplayable is matched by the error of a request that was not
// retried because its body could not be sent again: it has no GetBody and
// is longer than the Transport's body limit ([Options.BodyLimit]), or its
// GetBody failed.
var ErrBodyNotReplayable = errors.New("retryhttp: the request body cannot be sent again")

// notReplayable is the error of a failed attempt that cannot be repeated
// for want of the body.
type notReplayable struct {
	why string
	err error
}

func (e *notReplayable) Error() string {
	return "retryhttp: not retried: " + e.why + ": " + e.err.Error()
}

func (e *notReplayable) Unwrap() []error { return []error{ErrBodyNotReplayable, e.err} }

// errNoResponse is an attempt's error when the base RoundTripper broke its
// contract: no response and no error.
var errNoResponse = errors.New("retryhttp: the base RoundTripper returned neither a response nor an error")

// errAttemptTimeout is an attempt's error when the Retrier's attempt
// timeout ended it before its response headers. It matches
// context.DeadlineExceeded, never context.Canceled, which the Retrier
// would not retry.
var errAttemptTimeout error = &timeoutError{}

type timeoutError struct{}

func (*timeoutError) Error() string {
	return "retryhttp: the attempt timed out before its response headers"
}
func (*timeoutError) Unwrap() error { return context.DeadlineExceeded }
func (*timeoutError) Timeout() bool { return true }

// retryable reports whether a transport error may go away on another
// attempt: network and TLS handshake failures, timeouts and early EOFs.
// Certificate errors and errors that net/http makes of the request itself
// (an unsupported scheme, an invalid header) will not.
func retryable(err error) bool {
	if certificateError(err) {
		return false
	}
	var (
		netErr    net.Error
		recordErr tls.RecordHeaderError
		alert     tls.AlertError
		errno     syscall.Errno
	)
	switch {
	case errors.As(err, &netErr), errors.As(err, &recordErr), errors.As(err, &alert):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.As(err, &errno):
		return errno == syscall.ECONNRESET || errno == syscall.ECONNREFUSED ||
			errno == syscall.ECONNABORTED || errno == syscall.EPIPE
	}
	return false
}

// certificateError reports whether err is a failure to verify the
// server's certificate.
func certificateError(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid)
}

// unsent reports whether err shows that the request never had a
// connection: a failed dial (refused, DNS, dial timeout) or proxy
// connect.
func unsent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect")
}

// withholdServerText returns err, or, when err's text may quote the
// server, an error that does not repeat that text: errors.Is and errors.As
// still find the original. That is a protocol error of net/textproto
// (net/http puts the server's malformed line in it, "malformed MIME header
// line: ...", and a header line may hold a value), and any other error
// whose text has a double quote: net/http quotes the foreign strings it
// puts in an error (`malformed HTTP version "..."`, `malformed HTTP
// response "..."`, `bad Content-Length "..."`, `unsupported transfer
// encoding: "..."`), and a base's error may do the same. What comes
// before the first quote is kept. Failed dials and certificate errors,
// which quote no response, are kept whole.
func withholdServerText(err error) error {
	var pe textproto.ProtocolError
	if errors.As(err, &pe) {
		return &withheld{err: err}
	}
	if unsent(err) || certificateError(err) {
		return err
	}
	s := err.Error()
	if i := strings.IndexByte(s, '"'); i >= 0 {
		return &withheld{err: err, prefix: strings.TrimRight(s[:i], " :")}
	}
	return err
}

type withheld struct {
	err    error
	prefix string // the original's text up to its first quote; "" for a protocol error
}

func (e *withheld) Error() string {
	if e.prefix == "" {
		return "retryhttp: the server's response is malformed (a protocol error; its text, which quotes the response, is withheld)"
	}
	return "retryhttp: " + e.prefix + " (the quoted text, which may come from the server, is withheld)"
}
func (e *withheld) Unwrap() error { return e.err }
