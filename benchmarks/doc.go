// Package benchmarks measures github.com/steadfast-go/retry against its
// peers (cenkalti/backoff/v5, avast/retry-go/v5, sethvargo/go-retry and
// failsafe-go) in one run, and pins each library's observed behaviour in
// tests, so that the comparison in docs/comparison.md states only what
// is verified here, and measures retrygrpc and retryhttp against their
// peers. It is a separate module so that the root module
// never depends on the peers. See its README.md for the commands.
package benchmarks
