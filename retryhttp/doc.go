// Package retryhttp is an [http.RoundTripper] that retries HTTP requests
// with a [retry.Retrier]'s policy: it retries only what is safe to retry,
// sends the same body on every attempt, drains the responses it discards
// so their connections are reused, and obeys Retry-After within the
// Retrier's max delay.
//
//	r, _ := retry.New(retry.WithMaxAttempts(4))
//	client, _ := retryhttp.NewClient(r, nil) // or &retryhttp.Options{...}
//	resp, err := client.Get("https://api.example.com/v1/items")
//
// # What is retried
//
// A request is retried when the Retrier allows another attempt and:
//
//   - the attempt failed before the request had a connection (connection
//     refused, DNS failure, TLS handshake failure, dial timeout), whatever
//     the method: the server never saw it (see Unsent requests below);
//   - the request is idempotent and the attempt failed later (a timeout, a
//     reset, an early EOF, the Retrier's attempt timeout) or got a
//     retryable status: 408, 429, 500, 502, 503 or 504 by default
//     ([Options.Statuses]). Every other status is final.
//
// A status of [Options.PermanentStatuses] (none by default), such as a 404
// for a user that does not exist, is never retried, whatever the method,
// and ends the call as a permanent failure: observers, dead letters and an
// idempotency store see a failed call. Every other final status is a
// success to the Retrier.
//
// A request is idempotent when its method is GET, HEAD, OPTIONS, TRACE, PUT
// or DELETE ([Options.Methods] changes the set; an empty method is GET, as
// net/http sends it, here as in names and keys), or when it carries an
// Idempotency-Key header of its own (the IETF httpapi draft; or the
// header of [Options.IdempotencyKeyHeader]), which lets a server recognize a
// repeat. [Options.IdempotencyKeys] gives every other request (POST, PATCH,
// ...) a key, the same on every attempt: its context key (see
// Idempotency keys downstream), else a generated one. Certificate errors,
// malformed requests and errors of the request's own body are never
// retried.
//
// A failure after the request got its connection counts as sent, even a
// reset before any byte went out, since net/http does not tell the two
// apart; on a reused connection net/http itself sends again a request it
// knows it did not write.
//
// Unsent requests: when the base is an *http.Transport
// (http.DefaultTransport is one), a failure before httptrace's GotConn
// fired counts as unsent. Any other base (a wrapper, an HTTP/2 or HTTP/3
// transport, an in-process fake) may not fire GotConn, so there the
// Transport fails closed: only a failed dial or proxy connect (a
// *net.OpError with Op "dial" or "proxyconnect") counts as unsent, and
// every other failure of a request that is not idempotent is final.
//
// On 429 and 503 a Retry-After header, in seconds or as an HTTP date,
// replaces the backoff for the next wait, capped by the Retrier's
// [retry.WithMaxDelay] (30s by default); a malformed one is ignored. A 429
// without a valid one may give the wait in a rate limit's reset header,
// such as X-RateLimit-Reset, in seconds or as a Unix time
// ([Options.RateLimitResetHeaders], [ParseRateLimitReset]). As for every
// wait, one that would end at or after the request's context deadline is
// not started. Only a status the Transport retries gives the Retrier the
// server's delay: a 429 to a POST without a key is the caller's response,
// and pauses nothing (see Overload).
//
// # Hedged requests
//
// When the Retrier has [retry.WithHedge] (see [retry.Retrier.Hedges]), a
// request that is idempotent (its method, see above) or keyed (an
// Idempotency-Key header, or a context key with
// [Options.IdempotencyKeys]) is hedged, through [retry.HedgeValue]: when
// an attempt has not answered within the hedge delay, another is sent
// beside it, each on its own copy of the request with its own body from
// GetBody (or the Transport's copy), and the first success wins. The
// others' requests are aborted (their contexts end with
// [retry.ErrHedgeLost]) and their responses closed. A request that is
// neither, or whose body cannot be sent again (no GetBody and longer than
// [Options.BodyLimit]), is sent as without WithHedge, one attempt at a
// time. [Attempts] counts every request sent; when the call ends on a
// status, the caller gets the response of the attempt whose status the
// call ended on.
//
// # Overload
//
// The Retrier's budget, breaker, concurrency limit, rate and pause
// ([retry.WithOverload]) are shared by every request through the
// Transport: build one Retrier per downstream. Every attempt, each hedge
// included, takes a permit of [retry.OverloadOptions].Limit (such as
// [github.com/steadfast-go/retry/overload.Adaptive]) before it is sent,
// and gives it back when the attempt ends (its response's headers are
// in, and a retryable status's body read ahead, or it failed): a
// retryable status or a timeout tells the limit the server may be
// overloaded, an attempt aborted because another won tells it nothing.
// A refused first attempt sends nothing: RoundTrip returns the
// Retrier's error, which matches overload.ErrLimitExceeded. A refused
// retry ends the call as a budget's refusal does, the caller getting the
// last response; a refused hedge leaves the attempts already sent to
// answer.
//
// A rate ([retry.OverloadOptions].Rate, such as an overload.Rate) is
// asked before every attempt is sent, and a refused first attempt sends
// nothing: RoundTrip returns an error matching overload.ErrRateLimited.
// A pause ([retry.OverloadOptions].Pause, an overload.Pause) is fed by
// the server's delays above: one 429 or 503 with Retry-After (or a reset
// header) holds every request through the Transport, first attempts
// included, until the time the server gave, and lets them go spread over
// the pause's Spread after it; a request whose context ends before that
// is refused at once, unsent, with an error matching overload.ErrPaused.
// [Options.Partition] ([PartitionByHost]) puts each request in a
// partition of its own, so that a Partitioned pause or rate keeps a state
// per host (or per what the function names), and a 429 from one host
// holds only that host's requests. The partition key is never written in
// this package's errors.
//
// # Idempotency keys downstream
//
// Every attempt of a keyed request carries its key in the Idempotency-Key
// header ([Options.IdempotencyKeyHeader] names another), so that a server
// that dedupes on it, as Stripe's does, can tell a repeat: the request's
// own header when it has one, which it keeps; else the key in the
// request's context ([retry.ContextWithIdempotencyKey]), the caller's key
// for the work, which the Transport sends as given; else, with
// [Options.IdempotencyKeys], a generated one. It is the caller's key, never
// the store key below (scoped by a hash of the target): a caller who
// redelivers the same job with the same context key (after a deadline cut
// a request the server had already acted on, say) reaches the server with
// the same key, and the server dedupes. A generated key is new for each
// RoundTrip, so only a context key or the request's own closes that gap.
// A context key alone makes a POST (or any method not retried by itself)
// retryable only with IdempotencyKeys, which says the server honours
// keys; without it the header is sent, and the request is still sent
// once. A job that sends several requests with one context key sends
// that key on each: give each request its own header (derived from the
// job's key) when the server scopes keys to one request. A context key
// with a control character, which net/http cannot send, is not sent. The
// key never appears in this package's errors or in observers' events.
// The caller's request is not changed: the key is on the response's
// Request.
//
// # Bodies
//
// Every attempt sends the same bytes: through the request's GetBody when it
// has one (http.NewRequest sets it for *bytes.Buffer, *bytes.Reader and
// *strings.Reader bodies), otherwise from a copy of at most
// [DefaultBodyLimit] bytes ([Options.BodyLimit]) read before the first attempt.
// A larger body without GetBody is streamed once and not retried; if that
// attempt fails, the error matches [ErrBodyNotReplayable]. A declared
// ContentLength is not trusted for memory: the copy grows as the body is
// read. A copied body whose length is not its ContentLength (when that is
// above 0) is an error that names both lengths, and nothing is sent.
//
// A request that fails before any attempt (its body could not be read or
// copied, its ContentLength does not match its body, the request or its
// URL is nil, the Transport is a zero one that [NewTransport] did not
// build) gets a plain error from RoundTrip, not a [*retry.Error]: the
// Retrier never ran, so observers see no event and no dead letter is
// written.
//
// # Responses
//
// The response of a retried attempt is read up to [DrainLimit] bytes and
// closed, so a small body frees its connection for the next attempt. The
// final response is returned as net/http returns it, body unread, whatever
// its status. When the attempts end on a retryable or permanent status,
// while the request's context is live, RoundTrip returns that last
// response rather than an error, as http.Client returns any status;
// [Attempts] tells how many attempts were made. Otherwise the error is the
// Retrier's [*retry.Error] (errors.As finds it through http.Client's
// *url.Error), with Outcome, Attempts and the last attempt's error. A
// request that ends on a retryable status after its retries (attempts,
// budget or time spent) or on a permanent one is a failed call for the
// Retrier's observers and dead letters, although RoundTrip returns the
// response. A retryable status that is not retried at all, because the
// request is not idempotent (a POST without a key) or its body cannot be
// sent again, is returned as the response after one attempt and is a
// success for observers, dead letters and an idempotency store, like any
// other final status.
//
// Except when that call's dead letter was not recorded (every sink of
// [retry.WithDeadLetter] failed): then RoundTrip closes the response and
// returns the Retrier's error, which matches
// [retry.ErrDeadLetterNotRecorded] and holds the [*StatusError], so that
// the work is not dropped silently. A RoundTripper returns a response or
// an error, not both, and http.Client drops a response that comes with
// an error.
//
// # Context and time
//
// The request's context bounds all attempts and waits; cancelling it stops
// at once. With [retry.WithAttemptTimeout] each attempt gets that timeout
// up to its response headers, and an attempt cut by it there fails with an
// error that says so. Reading ahead the body of a retryable status (up to
// [DrainLimit]) has a bound of its own, [DefaultReadAheadTimeout] (1s)
// from the response's headers ([Options.ReadAheadTimeout]), also without an
// attempt timeout or a deadline, and is cut sooner by the attempt
// timeout when that ends first: when either runs out, the status stands
// (the next attempt follows, or the caller gets that response, whose body
// gives what came and then an error that says it was cut). So a server
// that sends a 503's headers and then stalls its body costs each attempt
// at most that bound. The final response's body is not cut by either: it
// lives until it is closed or the request's context ends.
//
// # Idempotency stores
//
// A request's Idempotency-Key (its own, its context's or generated) also
// becomes its key for a Retrier built with retry.WithIdempotency(store,
// nil), scoped as
// "http METHOD host TARGET KEY", where TARGET is a short hash (16
// characters) of the URL's scheme, path and query, never the path
// itself. A key in the request's context
// ([retry.ContextWithIdempotencyKey]) wins over it, unless that key is an
// enclosing idempotent call's with the same store (the request is sent
// from that call's fn): then the request's scoped key is used (of its
// own header, or else of that context key, which the request sends). The
// target is in the scope because http.Client copies the header onto a redirect it follows: the
// redirected request, to another path or query, is a request of its own
// and is sent, not replayed as the redirect's status. When the scoped key
// is longer than the store's 255-byte limit for keys, the store key is
// "http sha256 " and the SHA-256 of it in hex instead, so a header key of
// any length is taken,
// whatever the host's length. The store then keeps the status of a
// completed request, not its response: a later request with the same key
// is not sent, and RoundTrip returns an error matching [retry.ErrReplayed]
// that names the status. When the store cannot record a request that got
// its response, RoundTrip closes that response and returns the error,
// matching [retry.ErrOutcomeNotRecorded]: the request was sent and
// answered, so do not send it again blindly. Such a Retrier refuses a
// request without a key ([retry.ErrInvalidOption], nothing sent).
// [Options.IdempotencyKeys] generates keys only for the methods that are not
// idempotent, so a GET (or any method of [Options.Methods]) without its own
// Idempotency-Key header or context key is refused: give such a Retrier
// only to a Transport whose requests all carry a key, or make every
// method get one with IdempotencyKeys and Methods: []string{} (no method
// retried without a key).
//
// # Observability
//
// Observers and dead letters of the Retrier see each request under the
// Retrier's own name when it has one ([retry.WithName], such as
// "charge"), so that dead letters can be told apart and redriven by
// operation; otherwise under the operation name "METHOD host" (such as
// "GET api.example.com"; "GET" for an empty method); never the URL's path
// or query, which can hold identifiers. [Options.OperationName] wins over
// both. The errors of
// this package hold no header value, URL path or query; nor does the
// error of a malformed response, whose net/http text would quote the
// server's line: the text of a base transport's error that quotes
// anything (net/http quotes the server's strings, as in `malformed HTTP
// version "..."` or `bad Content-Length "..."`), or that is a
// textproto.ProtocolError, is withheld from the point of the quote
// (errors.Is and errors.As still find the original). Failed dials, TLS
// and timeout errors keep their text.
//
// # Cost
//
// A response that needed one attempt carries no mark, so that the
// Transport allocates nothing for [Attempts] on every request; Attempts
// reports 1 for it. BENCHMARKS.md has the figures.
package retryhttp
