//go:build race

package retrygrpc_test

// The race detector allocates on its own, so allocation guards skip.
const raceEnabled = true
