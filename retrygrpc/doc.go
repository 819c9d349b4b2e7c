// Package retrygrpc is a pair of gRPC client interceptors that run calls
// through a [retry.Retrier], with the semantics of gRPC's own retries
// (gRFC A6): which codes are retried per method, the server's pushback,
// the attempt count in metadata, and streams retried only until they are
// committed; and with what package retry adds: its budget and breaker,
// idempotency keys sent downstream, and hedged calls.
//
//	r, _ := retry.New(retry.WithName("inventory"))
//	unary, _ := retrygrpc.UnaryClientInterceptor(r, nil)
//	stream, _ := retrygrpc.StreamClientInterceptor(r, nil)
//	cc, _ := grpc.NewClient(target, grpc.WithDisableRetry(),
//		grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream))
//
// # What is retried
//
// An attempt that fails with a code its method's [Policy] retries is
// tried again while the Retrier allows (its attempts, backoff, budget,
// breaker): UNAVAILABLE by default. [Options.Methods] gives a Policy to a
// method ("/pkg.Service/Method"), a service ("pkg.Service") or every
// method (""); the most specific entry wins whole, as in a service
// config. Every other code ends the call at once: the attempt's error is
// marked [retry.Permanent], so observers and dead letters see a
// permanent failure. A call whose context ended is never retried.
//
// A method is idempotent when its descriptor declares idempotency_level
// IDEMPOTENT or NO_SIDE_EFFECTS (read from [Options.Files],
// protoregistry.GlobalFiles by default, where generated code registers
// its files), when its Policy sets Hedge, or, with
// [Options.IdempotencyKeys], for every keyed call. An idempotent call is
// also retried on [Policy.IdempotentRetryable] (DEADLINE_EXCEEDED and
// ABORTED by default), and hedged.
//
// # Pushback
//
// A failed attempt whose trailers carry grpc-retry-pushback-ms with a
// non-negative integer waits that many milliseconds before the next
// attempt instead of the backoff, as [retry.After] does: capped by the
// Retrier's [retry.WithMaxDelay] (30s by default), and not started when
// it would end past the call's deadline. A negative or malformed value,
// or more than one, means "do not retry", as A6 says: the call ends with
// that attempt's error, marked Permanent. Pushback does not make a code
// retryable that is not.
//
// Without a pushback, a status whose details carry a google.rpc.RetryInfo
// (AIP-194, as Google's APIs send with RESOURCE_EXHAUSTED) with a valid,
// non-negative retry_delay waits that instead of the backoff, the same
// way; one without a valid delay is ignored. It too makes no code
// retryable: list RESOURCE_EXHAUSTED in the Policy's RetryableCodes to
// retry it.
//
// After the pushback's wait, A6 (and grpc-go) restart the backoff at its
// initial value; here the Retrier's schedule goes on by attempt number,
// since a server that names one wait has not said its overload is over:
// with 100ms and a multiplier of 4, a pushback of 10ms after attempt 2
// gives waits of 100ms, 10ms, then 1.6s where A6 waits 100ms.
// [Options.RestartBackoffAfterPushback] does as A6. Its restarted waits
// reach the Retrier as a server's delay, so with
// [retry.OverloadOptions].Pause each also pauses the downstream: leave one
// of the two off.
//
// # Attempts and deadlines
//
// Every attempt after the first carries grpc-previous-rpc-attempts, the
// number of attempts of the call before it, hedges included. The call's
// context is each attempt's (or its parent, with
// [retry.WithAttemptTimeout]), so its deadline bounds all attempts, and
// no wait that cannot end before it is started: the call returns at once
// with the last attempt's status, in an error that matches
// context.DeadlineExceeded.
//
// # Errors
//
// A call that gave up returns an error in which errors.As finds the
// Retrier's [*retry.Error] (Outcome, Attempts), and whose status
// (status.FromError, status.Code) is the one grpc-go's own client would
// return: the last attempt's, its message and details untouched; the
// context's code (CANCELED, DEADLINE_EXCEEDED) when the call's context
// ended; UNAVAILABLE when no attempt reached the server (a budget, a
// breaker, a concurrency limit, a rate or a pause refused it); INTERNAL
// for bad input.
//
// # Budget, breaker, limit, rate and pause
//
// The Retrier's budget ([retry.OverloadOptions].Budget), breaker
// (OverloadOptions.Breaker), concurrency limit (OverloadOptions.Limit),
// rate (OverloadOptions.Rate) and pause (OverloadOptions.Pause) are
// shared by every call through the interceptors built with it. A6
// throttles retries per server name: build one Retrier, and so one
// budget and one limit, per target, and give it to that ClientConn's
// interceptors only. [github.com/steadfast-go/retry/overload.TokenBucket]
// is A6's throttling; to it a pushback is a throttled failure.
//
// Every attempt, a hedge and each attempt of a stream included, takes a
// permit of the limit ([github.com/steadfast-go/retry/overload.Adaptive])
// before it is sent, and gives it back when it ends (a stream's when it
// is committed, not at its end, so the limit bounds streams being
// opened, not open ones): a failure with a
// code its method's Policy retries tells the limit the server may be
// overloaded; any other code is a permanent answer, which tells it the
// server coped, and a hedge that lost tells it nothing. So a server that
// sheds load with RESOURCE_EXHAUSTED, which is not retried by default,
// tells the limit it coped, and the limit grows while it sheds: list
// that code in the Policy's RetryableCodes. A call whose first attempt the limit refuses sends
// nothing and ends with UNAVAILABLE, its error matching
// overload.ErrLimitExceeded; a refused retry ends the call with the last
// attempt's status; a refused hedge leaves the attempts already sent to
// answer.
//
// A rate ([github.com/steadfast-go/retry/overload.Rate]) is asked before
// every attempt; a call whose first attempt it refuses sends nothing and
// ends with UNAVAILABLE, its error matching overload.ErrRateLimited. A
// pause ([github.com/steadfast-go/retry/overload.Pause]) takes the
// server's delays above: one pushback, or one RetryInfo, on a code the
// Policy retries holds every call through the interceptors, first
// attempts included, until the time the server gave, and lets them go
// spread over the pause's Spread after it; a call whose deadline comes
// first ends at once, unsent, with UNAVAILABLE matching
// overload.ErrPaused. [Options.Partition] ([PartitionByMethod]) puts each
// call in a partition, so that a Partitioned rate or pause keeps a state
// per method (or per what the function names); the key goes in no
// metadata and no error.
//
// # Streams
//
// A stream is retried until it is committed, as A6 defines it: once the
// client has received the response's headers or a message, no attempt
// follows, and the stream is that attempt's. Until then every message
// sent is kept, and sent again with the CloseSend on a new attempt, up to
// [Options.MaxReplayBytes] in all (proto.Size of each message; 256 KiB by
// default, as grpc-go's retry buffer): the message that would pass the
// bound commits the stream instead, so a failure after it is not
// retried. A message that is not a proto.Message cannot be measured and
// commits the stream too. A goroutine runs each stream's attempts until
// it is committed or has failed for good; RecvMsg and Header wait for
// it, and a SendMsg whose attempt ended waits for the next attempt (and
// returns nil, its message sent again) or the end of the call (io.EOF;
// RecvMsg returns the call's error). As for any gRPC stream, end it
// (read until an error, or cancel its context), or that goroutine and
// the stream stay. Streams are never hedged.
//
// # Hedging
//
// When the Retrier hedges ([retry.WithHedge], [retry.Retrier.Hedges]),
// the unary calls of idempotent methods (see above) go through
// [retry.HedgeValue]: when an attempt has not answered within the hedge
// delay, another is sent beside it, each into a reply of its own, and
// the first success is copied into the caller's reply. A6's non-fatal
// codes are the retryable ones: such a failure of one attempt lets the
// others run and, as in A6, sends the next hedge at once, not after the
// hedge delay; any other code is fatal and ends the call. The losers'
// contexts are cancelled, which cancels their RPCs on the server too. A
// call of a method that is not idempotent, or whose reply is not a
// proto.Message, is never hedged.
//
// # Idempotency keys
//
// A call whose context has a key ([retry.ContextWithIdempotencyKey])
// sends it on every attempt in the idempotency-key metadata
// ([Options.IdempotencyKeyHeader] names another), so that a server that
// dedupes on it can tell a repeat. With [Options.IdempotencyKeys] a call
// without one gets a generated key, a random UUID, the same on all its
// attempts, and every keyed call is idempotent. A key with a character
// outside printable ASCII is not sent. Keys never appear in this
// package's errors, nor in the operation names observers see.
//
// # gRPC's own retries
//
// grpc-go retries by itself when a service config has a retryPolicy for
// the method (from the resolver, or grpc.WithDefaultServiceConfig), and
// each of the interceptor's attempts is then several: with 3 attempts
// here and maxAttempts 2 there, the server sees 6. Dial with
// grpc.WithDisableRetry() to leave retries to the interceptor. What can
// be detected is little: a ClientConn does not say whether it was dialled
// with WithDisableRetry, and grpc-go adds its grpc-previous-rpc-attempts
// below the interceptor, out of its sight. [ServiceConfigRetries]
// reports whether the service config has a retry policy for a method,
// for a check at start-up; the interceptors do not refuse such a
// ClientConn, since WithDisableRetry may have turned it off.
//
// # Observability
//
// Observers and dead letters of the Retrier see each call under the
// Retrier's own name when it has one ([retry.WithName]), else under its
// full method name ("/pkg.Service/Method"), built once per method.
//
// # Cost
//
// A unary call that succeeds on its first attempt, without a key,
// allocates nothing beyond what grpc-go does: its state is pooled and
// the policy of its method built once, on its first call.
package retrygrpc
