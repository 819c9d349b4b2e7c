//go:build race

package overload_test

// raceEnabled is true under -race, whose instrumentation allocates.
const raceEnabled = true
