//go:build !race

package retryhttp_test

const raceEnabled = false
