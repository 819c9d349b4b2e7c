package retrygrpc

import (
	"context"
	"fmt"
	"strings"

	"github.com/steadfast-go/retry"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoregistry"
)

const (
	// DefaultMaxReplayBytes bounds what a stream keeps of the messages it
	// sent, to send them again on a new attempt: 256 KiB, as grpc-go's
	// per-RPC retry buffer. See [Options.MaxReplayBytes].
	DefaultMaxReplayBytes = 256 << 10
	// NoReplay, given as [Options.MaxReplayBytes], keeps no message: a
	// stream is committed by its first SendMsg, so only a failure before
	// it is retried. It is how to say a bound of 0, since 0 means
	// DefaultMaxReplayBytes.
	NoReplay = -1
	// IdempotencyKeyHeader is the metadata key in which a call's
	// idempotency key goes out, on every attempt (see
	// [Options.IdempotencyKeyHeader]).
	IdempotencyKeyHeader = "idempotency-key"
	// PreviousAttemptsHeader is the metadata key, from gRFC A6, that
	// tells the server how many attempts of the call came before this one.
	// It is sent on every attempt but the first.
	PreviousAttemptsHeader = "grpc-previous-rpc-attempts"
	// PushbackTrailer is the trailer, from gRFC A6, in which a server asks
	// for a delay in milliseconds before the next attempt, or (a negative
	// or malformed value) for no other attempt.
	PushbackTrailer = "grpc-retry-pushback-ms"
)

// Policy says which failures of a method are retried, as the retryPolicy
// of a gRPC service config does; how many attempts, the backoff, the
// budget and the breaker are the Retrier's. The zero Policy gives the
// defaults. Every code not retried ends the call at once, as a
// [retry.Permanent] error.
type Policy struct {
	// RetryableCodes are retried for every call of the method. They must
	// be valid codes other than OK. An empty slice that is not nil,
	// []codes.Code{}, retries nothing. Default (nil): UNAVAILABLE, the
	// one code that says the server did not start the work.
	RetryableCodes []codes.Code
	// IdempotentRetryable are retried too, when the method is idempotent:
	// its descriptor declares idempotency_level IDEMPOTENT or
	// NO_SIDE_EFFECTS, Hedge is set, or the call carries an idempotency
	// key with [Options.IdempotencyKeys]. []codes.Code{} adds none.
	// Default (nil): DEADLINE_EXCEEDED and ABORTED, besides
	// RetryableCodes. The server may have done the work in both (a
	// deadline cut a reply short, a conflict aborted a transaction),
	// which only a method that can run twice survives; a call whose own
	// context ended is never retried, so DEADLINE_EXCEEDED here is a
	// server's or a proxy's. RESOURCE_EXHAUSTED (a quota, which a retry
	// spends more of), INTERNAL and UNKNOWN (often the same on every
	// attempt) are left out; list them to retry them.
	IdempotentRetryable []codes.Code
	// Hedge marks the method safe to run twice at once, as a descriptor
	// marked IDEMPOTENT or NO_SIDE_EFFECTS does: its unary calls are
	// hedged when the Retrier hedges ([retry.Retrier.Hedges]), and its
	// calls are retried on IdempotentRetryable. Default: false.
	Hedge bool
}

// Options configures [UnaryClientInterceptor] and
// [StreamClientInterceptor]. A nil *Options, like the zero value, gives
// the defaults; a zero field means its default.
type Options struct {
	// Methods maps a full method name ("/pkg.Service/Method"), a service
	// ("pkg.Service") or "" (every method) to its Policy. As in a service
	// config, the most specific entry wins whole: a method's entry
	// replaces its service's, which replaces "". Methods with no entry
	// get the zero Policy's defaults. The interceptor copies the map.
	Methods map[string]Policy
	// Files is where the interceptor reads a method's descriptor for its
	// idempotency_level. Default (nil): protoregistry.GlobalFiles, where
	// generated code registers its files.
	Files *protoregistry.Files
	// MaxReplayBytes bounds, in bytes (proto.Size of each message), what
	// a client-streaming or bidi stream keeps of the messages it sent
	// before it is committed, to send them again on a new attempt. The
	// message that would pass the bound commits the stream instead: it
	// and every later one are sent on the current attempt, and no
	// attempt follows. It must not be negative, or is [NoReplay]. Default
	// (0): [DefaultMaxReplayBytes], 256 KiB.
	MaxReplayBytes int
	// IdempotencyKeys gives every call without a key in its context
	// ([retry.ContextWithIdempotencyKey]) a generated one, a random UUID,
	// the same on all its attempts; and makes every keyed call idempotent
	// (retried on IdempotentRetryable, hedged), since it says the server
	// dedupes on the key. Without it a context key is sent all the same,
	// but changes nothing of what is retried. Default: false.
	IdempotencyKeys bool
	// IdempotencyKeyHeader is the metadata key that carries a call's
	// idempotency key. It must be a valid metadata key: lowercase
	// letters, digits, '-', '_' and '.', not starting with "grpc-" and
	// not ending with "-bin". Default (""): [IdempotencyKeyHeader],
	// "idempotency-key".
	IdempotencyKeyHeader string
	// RestartBackoffAfterPushback restarts the Retrier's backoff after a
	// server's pushback, as gRFC A6 and grpc-go's own retries do: the
	// first failure after the pushback's wait waits what the schedule
	// gives after attempt 1, the next after attempt 2, and so on. Default
	// (false): the schedule goes on by attempt number, since a server
	// that names one wait has not said its overload is over. A restarted
	// wait reaches the Retrier as a server's delay ([retry.After]): not
	// judged by [retry.WithRetryIf], capped at 30s without
	// [retry.WithMaxDelay], a throttled failure to a TokenBucket. Hedged
	// calls have no backoff, and are not changed. With a
	// [retry.OverloadOptions].Pause, a restarted wait pauses the
	// downstream as a server's would: leave this off there.
	RestartBackoffAfterPushback bool
	// Partition, if set, names the partition of the downstream a call
	// belongs to ([PartitionByMethod]: its method), which the interceptor
	// puts in the context it gives the Retrier ([overload.WithPartition]),
	// so that a Partitioned [overload.Pause] or [overload.Rate] of the
	// Retrier keeps a state per partition: a pushback on one method
	// pauses that method's calls only. "" is the partition of calls
	// without one. The key goes in no metadata and no error of this
	// package, and the library's observers do not record it. It must be
	// safe for concurrent use. Default (nil): the call's context's own
	// partition, if any.
	Partition func(ctx context.Context, method string) string
}

// PartitionByMethod is an [Options.Partition] that partitions by the
// full method name ("/pkg.Service/Method"): for a server whose quotas
// are per method.
func PartitionByMethod(_ context.Context, method string) string { return method }

// settings are Options checked, with the defaults filled in.
type settings struct {
	methods   map[string]Policy
	files     *protoregistry.Files
	maxReplay int // 0: keep nothing
	keys      bool
	keyHeader string
	restart   bool // RestartBackoffAfterPushback
	partition func(context.Context, string) string
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: retrygrpc: "+format, append([]any{retry.ErrInvalidOption}, args...)...)
}

func (o *Options) settings() (settings, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	s := settings{
		files:     opts.Files,
		maxReplay: opts.MaxReplayBytes,
		keys:      opts.IdempotencyKeys,
		keyHeader: IdempotencyKeyHeader,
		restart:   opts.RestartBackoffAfterPushback,
		partition: opts.Partition,
	}
	if s.files == nil {
		s.files = protoregistry.GlobalFiles
	}
	switch {
	case s.maxReplay == 0:
		s.maxReplay = DefaultMaxReplayBytes
	case s.maxReplay == NoReplay:
		s.maxReplay = 0
	case s.maxReplay < 0:
		return s, invalid("Options.MaxReplayBytes %d must not be negative (NoReplay, -1, keeps nothing)", s.maxReplay)
	}
	if h := opts.IdempotencyKeyHeader; h != "" {
		if !validMetadataKey(h) {
			return s, invalid("Options.IdempotencyKeyHeader %q: not a metadata key a call can send (lowercase letters, digits, '-', '_', '.'; no \"grpc-\" prefix, no \"-bin\" suffix)", h)
		}
		s.keyHeader = h
	}
	s.methods = make(map[string]Policy, len(opts.Methods))
	for name, p := range opts.Methods {
		if err := validName(name); err != nil {
			return s, err
		}
		if err := validCodes(name, "RetryableCodes", p.RetryableCodes); err != nil {
			return s, err
		}
		if err := validCodes(name, "IdempotentRetryable", p.IdempotentRetryable); err != nil {
			return s, err
		}
		s.methods[name] = p
	}
	return s, nil
}

// validName accepts "", a service "pkg.Service" and a full method name
// "/pkg.Service/Method".
func validName(name string) error {
	if name == "" {
		return nil
	}
	if strings.HasPrefix(name, "/") {
		svc, m, ok := strings.Cut(name[1:], "/")
		if !ok || svc == "" || m == "" || strings.Contains(m, "/") {
			return invalid("Options.Methods: %q is not a full method name (\"/pkg.Service/Method\")", name)
		}
		return nil
	}
	if strings.Contains(name, "/") {
		return invalid("Options.Methods: %q is neither a service (\"pkg.Service\") nor a full method name (\"/pkg.Service/Method\")", name)
	}
	return nil
}

func validCodes(name, field string, cs []codes.Code) error {
	for _, c := range cs {
		if c == codes.OK || c > codes.Unauthenticated {
			return invalid("Options.Methods[%q].%s: %v is not a failure code that can be retried", name, field, c)
		}
	}
	return nil
}

func validMetadataKey(k string) bool {
	if k == "" || strings.HasPrefix(k, "grpc-") || strings.HasSuffix(k, "-bin") {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// codeSet is a set of codes, one bit per code.
type codeSet uint32

func setOf(cs []codes.Code) codeSet {
	var s codeSet
	for _, c := range cs {
		s |= 1 << c
	}
	return s
}

func (s codeSet) has(c codes.Code) bool { return c < 32 && s&(1<<c) != 0 }

var (
	defaultRetryable  = setOf([]codes.Code{codes.Unavailable})
	defaultIdempotent = setOf([]codes.Code{codes.DeadlineExceeded, codes.Aborted})
)

// lookup returns the policy of a full method name, the most specific
// entry winning.
func (s *settings) lookup(method string) Policy {
	if p, ok := s.methods[method]; ok {
		return p
	}
	if svc, _, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/"); ok {
		if p, ok := s.methods[svc]; ok {
			return p
		}
	}
	return s.methods[""]
}
