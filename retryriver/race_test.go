//go:build race

package retryriver_test

// raceEnabled says the race detector is on.
const raceEnabled = true
