//go:build !race

package overload_test

const raceEnabled = false
