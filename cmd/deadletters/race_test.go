//go:build race

package main

// The race detector multiplies memory and time, so the memory test skips.
const raceEnabled = true
