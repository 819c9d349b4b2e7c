//go:build race

package retrystats_test

const raceEnabled = true
