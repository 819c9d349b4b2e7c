package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// bodyPrealloc is the most prepareBody reserves for a body before reading
// it. A declared ContentLength is the caller's word, not the body's: a
// larger body's buffer grows as its bytes actually arrive.
const bodyPrealloc = 64 << 10

// prepareBody makes the request's body replayable: through GetBody, or
// from a bounded copy. A body longer than the limit is streamed once. A
// copied body whose length is not its declared ContentLength (when that is
// above 0) is an error, and nothing is sent.
func (c *call) prepareBody() error {
	body := c.req.Body
	if body == nil || body == http.NoBody {
		return nil
	}
	c.hasBody = true
	if c.req.GetBody != nil {
		c.getBody = c.req.GetBody
		return nil
	}
	limit, declared := c.t.bodyLimit, c.req.ContentLength
	if declared > limit {
		c.once = tooLong(limit)
		return nil
	}
	most := limit + 1 // one byte more tells a longer body
	if most < 0 {
		most = limit // math.MaxInt64: no body is longer
	}
	size := int64(512)
	if declared > 0 {
		size = min(declared, bodyPrealloc) + 1 // +1 to see the end without growing
	}
	buf, eof, err := readUpTo(body, make([]byte, 0, min(size, most)), most)
	if err != nil {
		body.Close()
		return fmt.Errorf("retryhttp: reading the request body: %w", err)
	}
	r := *c.req
	if !eof || int64(len(buf)) > limit {
		c.once = tooLong(limit)
		r.Body = &joined{Reader: io.MultiReader(bytes.NewReader(buf), body), Closer: body}
		c.req = &r
		return nil
	}
	body.Close()
	if declared > 0 && int64(len(buf)) != declared {
		// net/http would fail on it too, after sending part of it.
		return fmt.Errorf("retryhttp: the request's ContentLength is %d but its body has %d bytes; nothing was sent", declared, len(buf))
	}
	c.getBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
	r.Body, _ = c.getBody()
	r.GetBody = c.getBody // lets net/http replay it on its own retries too
	c.req = &r
	return nil
}

func tooLong(limit int64) string {
	return fmt.Sprintf("the request body is longer than the %d-byte body limit and the request has no GetBody", limit)
}

// joined is the body of a request streamed once: the bytes read so far,
// then the rest of the caller's body.
type joined struct {
	io.Reader
	io.Closer
}

// readUpTo appends to buf from r until EOF, an error or most bytes, and
// reports whether it reached EOF. An EOF is not an error. A full buffer
// doubles (from 512 bytes), never past most.
func readUpTo(r io.Reader, buf []byte, most int64) ([]byte, bool, error) {
	for int64(len(buf)) < most {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(int64(max(cap(buf), 512)), most-int64(len(buf)))))
		}
		end := min(int64(cap(buf)), most)
		n, err := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, true, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
	return buf, false, nil
}

// hold reads ahead the body of a retryable status, up to DrainLimit, so
// that its connection can serve the next attempt, and keeps the response
// in case it is the last. It reads for at most the Transport's readAhead,
// and no longer than the attempt's timeout when it has one (its context
// ctx ends before the request's): a body that stalls or trickles is
// closed when either runs out, the status stands (a retryable one: the
// next attempt follows, or the caller gets this response), and reading
// its body gives what came, then an error that says which cut it.
func (c *call) hold(ctx context.Context, resp *http.Response) {
	timer := time.AfterFunc(c.t.readAhead, func() { resp.Body.Close() })
	var stop func() bool
	if ctx.Done() != c.ctx.Done() {
		stop = context.AfterFunc(ctx, func() { resp.Body.Close() })
	}
	buf, eof, err := readUpTo(resp.Body, c.drain[:0], DrainLimit)
	c.drain, c.last = buf, resp
	var cut error
	if !timer.Stop() {
		cut = errReadAheadCut
	}
	if stop != nil && !stop() {
		cut = errDrainCut
	}
	if eof {
		resp.Body.Close() // read to its end, whatever closed it after
		return
	}
	if cut != nil {
		c.rest, c.restErr = nil, cut
		return
	}
	c.rest, c.restErr = resp.Body, err
}

// errDrainCut ends the body of a response whose read ahead the attempt's
// timeout cut.
var errDrainCut = errors.New("retryhttp: the attempt timed out while its response's body was read ahead; the rest of the body is lost")

// errReadAheadCut ends the body of a response whose read ahead took
// longer than the Transport's bound (Options.ReadAheadTimeout).
var errReadAheadCut = errors.New("retryhttp: the response's body was not read ahead within the read-ahead timeout (Options.ReadAheadTimeout); the rest of the body is lost")

// keep holds the response of an attempt with a permanent status, which
// is the last: its body is left unread, for the caller.
func (c *call) keep(resp *http.Response) {
	c.last, c.rest, c.drain = resp, resp.Body, c.drain[:0]
}

// dropLast discards the held response: another attempt follows, or the
// call failed.
func (c *call) dropLast() {
	if c.rest != nil {
		c.rest.Close()
	}
	if c.lastCancel != nil {
		c.lastCancel(nil)
	}
	c.last, c.rest, c.restErr, c.lastCancel = nil, nil, nil, nil
}

// takeLast hands the held response to the caller, its body whole: the
// bytes read so far, then the rest.
func (c *call) takeLast() *http.Response {
	resp := c.last
	resp.Body = &heldBody{buf: c.drain, rest: c.rest, err: c.restErr, cancel: c.lastCancel}
	c.drain = nil // the caller's now: not back into the pool
	c.last, c.rest, c.restErr, c.lastCancel = nil, nil, nil, nil
	return resp
}

var errClosed = errors.New("retryhttp: read on closed response body")

// heldBody is the body of a response that was read ahead. Like net/http's
// bodies, it may be closed while another goroutine reads it, which aborts
// that read: mu guards its fields, but is not held across the read of
// rest, which may block.
type heldBody struct {
	mu     sync.Mutex
	buf    []byte
	rest   io.ReadCloser // nil: buf is all of it
	err    error         // what reading the rest gave, if not EOF
	cancel context.CancelCauseFunc
	closed bool
}

func (b *heldBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return 0, errClosed
	case len(b.buf) > 0:
		n := copy(p, b.buf)
		b.buf = b.buf[n:]
		b.mu.Unlock()
		return n, nil
	case b.err != nil:
		b.mu.Unlock()
		return 0, b.err
	case b.rest == nil:
		b.mu.Unlock()
		return 0, io.EOF
	}
	rest := b.rest
	b.mu.Unlock()
	return rest.Read(p) // a concurrent Close ends it
}

func (b *heldBody) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	rest, cancel := b.rest, b.cancel
	b.mu.Unlock()
	var err error
	if rest != nil {
		err = rest.Close()
	}
	if cancel != nil {
		cancel(nil)
	}
	return err
}

// cancelOnClose wraps a final response's body so that closing it also ends
// the context the attempt ran on. A writable body (a 101 Switching
// Protocols response) stays writable.
func cancelOnClose(body io.ReadCloser, cancel context.CancelCauseFunc) io.ReadCloser {
	b := cancelBody{ReadCloser: body, cancel: cancel}
	if w, ok := body.(io.Writer); ok {
		return &cancelWriteBody{cancelBody: b, w: w}
	}
	return &b
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

type cancelWriteBody struct {
	cancelBody
	w io.Writer
}

func (b *cancelWriteBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// cannotFail says whether a request body is one whose reads cannot fail
// or that net/http sends its own way: the in-memory readers of
// http.NewRequest (through io.NopCloser, as GetBody gives them) and
// files. Those are sent as they are, so that net/http still writes an
// in-memory body with its headers and a file with sendfile; the others
// are wrapped in a recordingBody.
func cannotFail(body io.ReadCloser) bool {
	var r io.Reader = body
	if t := reflect.TypeOf(body); t == nopCloserType || t == nopCloserWriterToType {
		r = reflect.ValueOf(body).Field(0).Interface().(io.Reader)
	}
	switch r.(type) {
	case *bytes.Reader, *bytes.Buffer, *strings.Reader, *os.File:
		return true
	}
	return false
}

var (
	nopCloserType         = reflect.TypeOf(io.NopCloser(nil))
	nopCloserWriterToType = reflect.TypeOf(io.NopCloser(struct {
		io.Reader
		io.WriterTo
	}{}))
)

// recordingBody is the body of a request as an attempt sends it: it keeps
// the first read error that is not io.EOF, which is the body's own, however
// net/http wraps it. It is read by net/http's writing goroutine.
type recordingBody struct {
	io.ReadCloser
	err atomic.Pointer[error]
}

func (b *recordingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.err.CompareAndSwap(nil, &err)
	}
	return n, err
}

// failed returns the body's read error, or nil.
func (b *recordingBody) failed() error {
	if p := b.err.Load(); p != nil {
		return *p
	}
	return nil
}

// bodyReadError is the error of an attempt whose request body failed to
// read: not retried, since the fault is the request's own.
type bodyReadError struct {
	body error // the body's read error
	err  error // the attempt's error, which may wrap it
}

func (e *bodyReadError) Error() string {
	return "retryhttp: reading the request body: " + e.body.Error()
}

func (e *bodyReadError) Unwrap() []error { return []error{e.body, e.err} }
