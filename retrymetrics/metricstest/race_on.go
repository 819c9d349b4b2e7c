//go:build race

package metricstest

// raceEnabled says whether the race detector is on; it allocates, so
// NoAllocation skips under it.
const raceEnabled = true
