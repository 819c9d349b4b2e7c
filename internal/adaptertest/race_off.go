//go:build !race

package adaptertest

// RaceEnabled says whether the race detector is on; it allocates, so
// allocation tests skip under it.
const RaceEnabled = false
