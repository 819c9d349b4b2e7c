package retrygrpc

import (
	"context"
	"sync/atomic"

	"github.com/steadfast-go/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// UnaryClientInterceptor returns an interceptor that runs each unary call
// through r: the failures that its method's [Policy] retries are tried
// again on r's schedule, budget and breaker, within the call's context;
// the others end the call at once. A nil r means the defaults: those
// of the zero [retry.Retrier] (as [retry.New]() but with no budget), as
// in retryhttp; a nil opts every [Options] default. When r hedges
// ([retry.WithHedge]), the calls of methods safe to run twice at once are
// hedged. An invalid option gives an error wrapping
// [retry.ErrInvalidOption]. The interceptor is safe for concurrent use;
// build it once per ClientConn, with a Retrier of its own, so that one
// budget covers one target. See the package doc.
func UnaryClientInterceptor(r *retry.Retrier, opts *Options) (grpc.UnaryClientInterceptor, error) {
	ic, err := newInterceptor(r, opts)
	if err != nil {
		return nil, err
	}
	return ic.unary, nil
}

// unaryCall is the state of one unary call, pooled by the interceptor:
// nothing that outlives the call may point into one.
type unaryCall struct {
	fn         func(context.Context) error // c.attempt, bound once
	trailerOpt grpc.CallOption             // grpc.Trailer(&c.trailer), made once

	ic        *interceptor
	ctx       context.Context
	method    string
	req       any
	reply     any
	cc        *grpc.ClientConn
	invoker   grpc.UnaryInvoker
	opts      []grpc.CallOption // the caller's, then trailerOpt
	key       string
	retryable codeSet
	n         int
	trailer   metadata.MD
	since     sincePushback
	restart   bool // Options.RestartBackoffAfterPushback
}

func (ic *interceptor) unary(ctx context.Context, name string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	ctx = ic.partitioned(ctx, name)
	m := ic.method(name)
	key, keyed := ic.key(ctx)
	idempotent := m.safe || keyed
	if idempotent && ic.hedges {
		if msg, ok := reply.(proto.Message); ok && msg != nil {
			return ic.hedge(ctx, m, name, req, msg, cc, invoker, opts, key)
		}
	}
	c := ic.unaries.Get().(*unaryCall)
	c.ic, c.ctx, c.method, c.req, c.reply, c.cc, c.invoker, c.key = ic, ctx, name, req, reply, cc, invoker, key
	c.retryable = m.retryable
	c.since.r, c.restart = m.r, ic.restart
	if idempotent {
		c.retryable = m.idempotent
	}
	c.opts = append(append(c.opts[:0], opts...), c.trailerOpt)
	err := m.r.Do(ctx, c.fn)
	clear(c.opts)
	*c = unaryCall{fn: c.fn, trailerOpt: c.trailerOpt, opts: c.opts[:0]}
	ic.unaries.Put(c)
	return gaveUp(ctx, err)
}

// attempt invokes the call once. It is the function the Retrier runs.
func (c *unaryCall) attempt(ctx context.Context) error {
	n := c.n
	c.n++
	c.trailer = nil
	err := c.invoker(c.ic.outgoing(ctx, n, c.key), c.method, c.req, c.reply, c.cc, c.opts...)
	if err == nil {
		return nil
	}
	var since *sincePushback
	if c.restart {
		since = &c.since
	}
	return verdict(c.ctx, ctx, c.retryable, err, c.trailer, since)
}

// hedgedUnary is what the attempts of a hedged unary call share; each
// attempt has a reply of its own, since a loser may still be decoding
// when the call has returned.
type hedgedUnary struct {
	ic        *interceptor
	ctx       context.Context
	method    string
	req       any
	replyType protoreflect.MessageType
	cc        *grpc.ClientConn
	invoker   grpc.UnaryInvoker
	opts      []grpc.CallOption
	key       string
	retryable codeSet
	n         atomic.Int32
}

// hedge runs a call of a method safe to run twice at once through
// retry.HedgeValue, and copies the winner's reply into reply.
func (ic *interceptor) hedge(ctx context.Context, m *method, name string, req any, reply proto.Message, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption, key string) error {
	h := &hedgedUnary{ic: ic, ctx: ctx, method: name, req: req, replyType: reply.ProtoReflect().Type(),
		cc: cc, invoker: invoker, opts: opts[:len(opts):len(opts)], key: key, retryable: m.idempotent}
	won, err := retry.HedgeValue(ctx, m.r, h.attempt)
	if err != nil {
		return gaveUp(ctx, err)
	}
	proto.Reset(reply)
	proto.Merge(reply, won)
	return nil
}

func (h *hedgedUnary) attempt(ctx context.Context) (proto.Message, error) {
	n := int(h.n.Add(1)) - 1
	out := h.replyType.New().Interface()
	var trailer metadata.MD
	err := h.invoker(h.ic.outgoing(ctx, n, h.key), h.method, h.req, out, h.cc, append(h.opts, grpc.Trailer(&trailer))...)
	if err != nil {
		return nil, verdict(h.ctx, ctx, h.retryable, err, trailer, nil) // no backoff to restart
	}
	return out, nil
}
