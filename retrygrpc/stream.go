package retrygrpc

import (
	"context"
	"io"
	"sync"

	"github.com/steadfast-go/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// StreamClientInterceptor returns an interceptor that runs each stream
// through r until it is committed, as gRFC A6 defines it: a failure that
// its method's [Policy] retries, before the client received the
// response's headers or a message, starts a new attempt on r's schedule,
// budget and breaker, which sends again the messages sent so far (up to
// [Options.MaxReplayBytes]) and the CloseSend; once the headers are in, a
// message is, or the sent messages passed that bound, no attempt follows
// and the stream is the last attempt's. Streams are not hedged. A nil r
// means the defaults: those of the zero [retry.Retrier] (as [retry.New]()
// but with no budget), as in retryhttp; a nil opts every [Options]
// default. An invalid option gives an error wrapping
// [retry.ErrInvalidOption]. Safe for concurrent use; see the package doc.
func StreamClientInterceptor(r *retry.Retrier, opts *Options) (grpc.StreamClientInterceptor, error) {
	ic, err := newInterceptor(r, opts)
	if err != nil {
		return nil, err
	}
	return ic.stream, nil
}

// retryStream is the ClientStream the interceptor returns. A goroutine
// runs the Retrier's loop (run) until the stream is committed or failed
// for good; the caller's RecvMsg and Header wait for that, SendMsg and
// CloseSend go to the current attempt and are kept for the next one.
type retryStream struct {
	ic        *interceptor
	m         *method
	ctx       context.Context
	desc      *grpc.StreamDesc
	cc        *grpc.ClientConn
	name      string
	streamer  grpc.Streamer
	opts      []grpc.CallOption
	key       string
	retryable codeSet
	since     *sincePushback // with Options.RestartBackoffAfterPushback

	opened   chan struct{} // closed once the first attempt is open, or the call decided
	openOnce sync.Once
	decided  chan struct{} // closed when the Retrier's loop has returned

	mu        sync.Mutex
	cond      sync.Cond // on mu: gen or done changed
	n         int       // attempts started
	gen       int       // attempts opened
	cur       grpc.ClientStream
	cancel    context.CancelFunc // of cur's context, when it has one of its own
	buf       []any              // sent while not committed
	bufBytes  int
	closeSent bool
	committed bool
	done      bool  // the loop returned
	err       error // what it returned
}

func (ic *interceptor) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, name string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	ctx = ic.partitioned(ctx, name)
	m := ic.method(name)
	key, keyed := ic.key(ctx)
	s := &retryStream{ic: ic, m: m, ctx: ctx, desc: desc, cc: cc, name: name, streamer: streamer,
		opts: opts, key: key, retryable: m.retryable,
		opened: make(chan struct{}), decided: make(chan struct{})}
	if m.safe || keyed {
		s.retryable = m.idempotent
	}
	if ic.restart {
		s.since = &sincePushback{r: m.r}
	}
	s.cond.L = &s.mu
	go s.run()
	<-s.opened
	s.mu.Lock()
	cur, err := s.cur, s.err
	s.mu.Unlock()
	if cur == nil {
		<-s.decided
		return nil, err
	}
	return s, nil
}

func (s *retryStream) run() {
	err := gaveUp(s.ctx, s.m.r.Do(s.ctx, s.attempt))
	s.mu.Lock()
	s.done, s.err = true, err
	s.cond.Broadcast()
	s.mu.Unlock()
	s.openOnce.Do(func() { close(s.opened) })
	close(s.decided)
}

// attempt opens a stream, sends again what the caller sent, and waits
// until it is committed (nil) or ends before its headers (the verdict on
// its status). It is the function the Retrier runs.
func (s *retryStream) attempt(ctx context.Context) error {
	s.mu.Lock()
	n := s.n
	s.n++
	sctx := s.ctx
	var (
		cancel context.CancelFunc
		stop   func() bool
	)
	if ctx.Done() != s.ctx.Done() {
		// The Retrier gave the attempt a context of its own (an attempt
		// timeout), which ends when the attempt returns: the committed
		// stream must outlive it, so it runs on a context of ours, which
		// the attempt's ends only until it is committed.
		sctx, cancel = context.WithCancel(s.ctx)
		stop = context.AfterFunc(ctx, cancel)
	}
	cs, err := s.streamer(s.ic.outgoing(sctx, n, s.key), s.desc, s.cc, s.name, s.opts...)
	if err != nil {
		s.mu.Unlock()
		if cancel != nil {
			stop()
			cancel()
		}
		return verdict(s.ctx, ctx, s.retryable, err, nil, s.since)
	}
	for _, msg := range s.buf {
		if cs.SendMsg(msg) != nil {
			break // the attempt ended; its status tells below
		}
	}
	if s.closeSent {
		cs.CloseSend()
	}
	s.cur, s.cancel = cs, cancel
	s.gen++
	s.cond.Broadcast()
	s.mu.Unlock()
	s.openOnce.Do(func() { close(s.opened) })

	if hdr, _ := cs.Header(); hdr != nil {
		// Headers received: committed.
		if stop != nil {
			stop()
		}
		s.commit()
		return nil
	}
	// The stream ended without headers, so without a message: its status
	// can be read here, while the caller's RecvMsg waits for the loop.
	rerr := cs.RecvMsg(new(emptypb.Empty))
	if rerr == nil || rerr == io.EOF {
		s.commit() // a trailers-only success
		return nil
	}
	if cancel != nil {
		stop()
		cancel()
	}
	s.mu.Lock()
	committed := s.committed
	s.mu.Unlock()
	if committed {
		return retry.Permanent(rerr) // past MaxReplayBytes: no attempt follows
	}
	return verdict(s.ctx, ctx, s.retryable, rerr, cs.Trailer(), s.since)
}

func (s *retryStream) commit() {
	s.mu.Lock()
	s.committed, s.buf, s.bufBytes = true, nil, 0
	s.mu.Unlock()
}

// SendMsg sends m on the current attempt and keeps it for the next one
// while the stream is not committed. When the attempt ended, it waits for
// the Retrier: nil when another attempt sent m again, io.EOF when none
// follows (RecvMsg then returns the call's error).
func (s *retryStream) SendMsg(m any) error {
	s.mu.Lock()
	if s.committed || s.done {
		cs := s.cur
		s.mu.Unlock()
		return cs.SendMsg(m)
	}
	size := -1
	if pm, ok := m.(proto.Message); ok {
		size = proto.Size(pm)
	}
	if size < 0 || s.bufBytes+size > s.ic.maxReplay || s.ic.maxReplay == 0 {
		// A6: a stream whose sent messages pass the buffer is committed.
		s.committed, s.buf, s.bufBytes = true, nil, 0
		cs := s.cur
		s.mu.Unlock()
		return cs.SendMsg(m)
	}
	s.buf = append(s.buf, m)
	s.bufBytes += size
	cs, gen := s.cur, s.gen
	s.mu.Unlock()
	err := cs.SendMsg(m)
	if err != io.EOF {
		return err
	}
	s.mu.Lock()
	for s.gen == gen && !s.done {
		s.cond.Wait()
	}
	retried := s.gen != gen
	s.mu.Unlock()
	if retried {
		return nil
	}
	return io.EOF
}

// RecvMsg waits until the stream is committed or failed for good, then
// reads from the last attempt; a call that failed before it was
// committed returns the Retrier's error, whose status is the last
// attempt's (status.Code sees it).
func (s *retryStream) RecvMsg(m any) error {
	<-s.decided
	if s.err != nil {
		return s.err
	}
	err := s.cur.RecvMsg(m)
	if err != nil && s.cancel != nil {
		s.cancel()
	}
	return err
}

// Header waits as RecvMsg does, then returns the last attempt's headers.
func (s *retryStream) Header() (metadata.MD, error) {
	<-s.decided
	if s.err != nil {
		return nil, s.err
	}
	return s.cur.Header()
}

// Trailer returns the current attempt's trailers; call it once RecvMsg
// has returned an error, as for any ClientStream.
func (s *retryStream) Trailer() metadata.MD {
	s.mu.Lock()
	cs := s.cur
	s.mu.Unlock()
	return cs.Trailer()
}

// CloseSend closes the sending side of the current attempt, and of every
// later one.
func (s *retryStream) CloseSend() error {
	s.mu.Lock()
	s.closeSent = true
	cs := s.cur
	s.mu.Unlock()
	return cs.CloseSend()
}

// Context returns the current attempt's context (with its peer, say),
// which a later attempt replaces. Unlike grpc-go's own retries, calling
// it does not commit the stream.
func (s *retryStream) Context() context.Context {
	s.mu.Lock()
	cs := s.cur
	s.mu.Unlock()
	return cs.Context()
}
