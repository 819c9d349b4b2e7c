//go:build race

package redisstore

// The race detector allocates on its own, so allocation guards skip.
const raceEnabled = true
