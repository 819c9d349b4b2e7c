//go:build !race

package retrygrpc_test

const raceEnabled = false
