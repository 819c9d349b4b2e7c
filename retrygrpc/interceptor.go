package retrygrpc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// maxMethods bounds the methods whose policy an interceptor keeps built;
// a proxy that forwards any method name cannot grow it past this, and
// later methods are looked up on each call.
const maxMethods = 4096

// interceptor is what both interceptors share.
type interceptor struct {
	settings
	r       *retry.Retrier
	named   bool     // the Retrier has a name of its own, which calls keep
	hedges  bool     // the Retrier hedges
	methods sync.Map // full method name -> *method
	n       atomic.Int32
	unaries sync.Pool // of *unaryCall
}

// method is what a call needs of its method, built once per method.
type method struct {
	name       string
	retryable  codeSet // every call
	idempotent codeSet // retryable plus IdempotentRetryable
	safe       bool    // the descriptor or Policy.Hedge says it can run twice at once
	r          *retry.Retrier
}

func newInterceptor(r *retry.Retrier, opts *Options) (*interceptor, error) {
	s, err := opts.settings()
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = &retry.Retrier{}
	}
	ic := &interceptor{settings: s, r: r, named: r.Name() != "", hedges: r.Hedges()}
	ic.unaries.New = func() any {
		c := new(unaryCall)
		c.fn = c.attempt // bound once per pooled call, not per call
		c.trailerOpt = grpc.Trailer(&c.trailer)
		return c
	}
	return ic, nil
}

// method returns the built policy of name.
func (ic *interceptor) method(name string) *method {
	if m, ok := ic.methods.Load(name); ok {
		return m.(*method)
	}
	m := ic.build(name)
	if ic.n.Load() < maxMethods {
		if v, loaded := ic.methods.LoadOrStore(name, m); loaded {
			return v.(*method)
		}
		ic.n.Add(1)
	}
	return m
}

func (ic *interceptor) build(name string) *method {
	p := ic.lookup(name)
	m := &method{name: name, retryable: defaultRetryable, r: ic.r}
	if p.RetryableCodes != nil {
		m.retryable = setOf(p.RetryableCodes)
	}
	m.idempotent = m.retryable | defaultIdempotent
	if p.IdempotentRetryable != nil {
		m.idempotent = m.retryable | setOf(p.IdempotentRetryable)
	}
	m.safe = p.Hedge || ic.declaredIdempotent(name)
	if !ic.named {
		// Observers and dead letters see the method's name: a bounded
		// set, from generated code, that holds no identifier.
		if nr, err := ic.r.With(retry.WithName(name)); err == nil {
			m.r = nr
		}
	}
	return m
}

// declaredIdempotent reports whether the descriptor of the full method
// name declares idempotency_level IDEMPOTENT or NO_SIDE_EFFECTS.
func (ic *interceptor) declaredIdempotent(name string) bool {
	full := strings.Replace(strings.TrimPrefix(name, "/"), "/", ".", 1)
	if !protoreflect.FullName(full).IsValid() {
		return false
	}
	d, err := ic.files.FindDescriptorByName(protoreflect.FullName(full))
	if err != nil {
		return false
	}
	md, ok := d.(protoreflect.MethodDescriptor)
	if !ok {
		return false
	}
	o, ok := md.Options().(*descriptorpb.MethodOptions)
	if !ok || o == nil {
		return false
	}
	switch o.GetIdempotencyLevel() {
	case descriptorpb.MethodOptions_IDEMPOTENT, descriptorpb.MethodOptions_NO_SIDE_EFFECTS:
		return true
	}
	return false
}

// key returns the call's idempotency key: its context's, else a
// generated one with Options.IdempotencyKeys; and whether it makes the
// call idempotent.
func (ic *interceptor) key(ctx context.Context) (string, bool) {
	if k, ok := retry.IdempotencyKeyFromContext(ctx); ok && k != "" && validMetadataValue(k) {
		return k, ic.keys
	}
	if ic.keys {
		return newKey(), true
	}
	return "", false
}

// outgoing returns ctx with the metadata of attempt n (0 the first): the
// count of the attempts before it, and the key. The first attempt of an
// unkeyed call gets ctx itself.
func (ic *interceptor) outgoing(ctx context.Context, n int, key string) context.Context {
	switch {
	case n == 0 && key == "":
		return ctx
	case n == 0:
		return metadata.AppendToOutgoingContext(ctx, ic.keyHeader, key)
	case key == "":
		return metadata.AppendToOutgoingContext(ctx, PreviousAttemptsHeader, strconv.Itoa(n))
	default:
		return metadata.AppendToOutgoingContext(ctx, PreviousAttemptsHeader, strconv.Itoa(n), ic.keyHeader, key)
	}
}

// verdict is what the Retrier is told of a failed attempt: err, marked
// Permanent when it must not be retried, or with the server's pushback.
// callCtx is the call's context, ctx the attempt's; since is nil unless
// Options.RestartBackoffAfterPushback.
func verdict(callCtx, ctx context.Context, retryable codeSet, err error, trailer metadata.MD, since *sincePushback) error {
	if callCtx.Err() != nil || ctx.Err() != nil {
		// The call's context ended (the Retrier stops), or the attempt's
		// did: its timeout, or another hedged attempt won. Not the
		// server's answer: the Retrier decides.
		return err
	}
	var wait time.Duration
	pushback := trailer[PushbackTrailer]
	switch len(pushback) {
	case 0:
	case 1:
		ms, perr := strconv.ParseInt(pushback[0], 10, 64)
		if perr != nil || ms < 0 {
			return retry.Permanent(err) // A6: the server asks for no retry
		}
		wait = time.Duration(min(ms, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
	default:
		return retry.Permanent(err) // several values, as grpc-go: no retry
	}
	st, _ := status.FromError(err)
	if !retryable.has(st.Code()) {
		return retry.Permanent(err)
	}
	if len(pushback) == 1 {
		since.pushedBack()
		return retry.After(err, wait)
	}
	if d, ok := retryInfo(st); ok {
		// The server's delay in the status (AIP-194), as a pushback: the
		// Retrier waits it, and an OverloadOptions.Pause holds every call
		// sharing it until then.
		since.pushedBack()
		return retry.After(err, d)
	}
	return since.restarted(err)
}

// retryInfo returns the wait a status's google.rpc.RetryInfo detail asks
// for, and whether it has one with a valid, non-negative retry_delay.
func retryInfo(st *status.Status) (time.Duration, bool) {
	for _, d := range st.Details() {
		ri, ok := d.(*errdetails.RetryInfo)
		if !ok || ri.GetRetryDelay() == nil || ri.GetRetryDelay().CheckValid() != nil {
			continue
		}
		if d := ri.GetRetryDelay().AsDuration(); d >= 0 {
			return d, true
		}
	}
	return 0, false
}

// partitioned returns ctx with the call's partition of the downstream
// (Options.Partition), which a Partitioned pause or rate of the Retrier
// reads; ctx itself without the option.
func (ic *interceptor) partitioned(ctx context.Context, method string) context.Context {
	if ic.partition == nil {
		return ctx
	}
	return overload.WithPartition(ctx, ic.partition(ctx, method))
}

// sincePushback is what a call keeps of its last pushback, for
// Options.RestartBackoffAfterPushback: the Retrier's schedule restarts
// after it, counted from the failures since, as in A6.
type sincePushback struct {
	r      *retry.Retrier
	pushed bool          // a pushback came
	n      int           // attempts that failed since, without one
	prev   time.Duration // the wait after the last of them; 0, as for Do's first
}

func (p *sincePushback) pushedBack() {
	if p != nil {
		p.pushed, p.n, p.prev = true, 0, 0
	}
}

// restarted returns err as the Retrier is to see it: after a pushback,
// with the wait its schedule gives the n-th failed attempt since, as the
// server's delay so that the Retrier takes it as it is.
func (p *sincePushback) restarted(err error) error {
	if p == nil || !p.pushed {
		return err
	}
	p.n++
	p.prev, _ = p.r.Wait(p.n, p.prev, err, nil)
	return retry.After(err, p.prev)
}

// newKey returns a random UUID (version 4).
func newKey() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// validMetadataValue reports whether v can go out as an ASCII metadata
// value: printable ASCII only.
func validMetadataValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// ServiceConfigRetries reports whether cc's service config has a retry
// policy for method (a full method name), which grpc-go runs beneath
// the interceptor unless cc was dialled with grpc.WithDisableRetry: a
// ClientConn does not tell whether it was, so a true here means "check
// the dial options", not "retries twice". Call it at start-up, after the
// first call has resolved the service config; safe for concurrent use.
func ServiceConfigRetries(cc *grpc.ClientConn, method string) bool {
	return cc != nil && cc.GetMethodConfig(method).RetryPolicy != nil
}

// callError is what a call that gave up returns: the Retrier's error, in
// which errors.As finds the [*retry.Error], seen by the status package as
// grpc-go's own client would have it: the last attempt's status, message
// and details untouched (status.FromError would otherwise give the
// wrapped text as the message); the context's code when the call's
// context ended; UNAVAILABLE when no attempt reached the server (a budget
// or a breaker refused it), INTERNAL for bad input.
type callError struct {
	err error
	st  *status.Status
}

func (e *callError) Error() string              { return e.err.Error() }
func (e *callError) Unwrap() error              { return e.err }
func (e *callError) GRPCStatus() *status.Status { return e.st }

// gaveUp wraps the error of the call whose context is ctx as a callError.
func gaveUp(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var st *status.Status
	var gs interface{ GRPCStatus() *status.Status }
	switch {
	case ctx.Err() != nil:
		st = status.FromContextError(ctx.Err())
	case errors.As(err, &gs):
		st = gs.GRPCStatus()
	case errors.Is(err, retry.ErrInvalidOption):
		st = status.New(codes.Internal, err.Error())
	default:
		st = status.New(codes.Unavailable, err.Error())
	}
	return &callError{err: err, st: st}
}
