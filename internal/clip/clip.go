// Package clip bounds the error texts of a dead letter, so that no record
// grows with the errors of its call: the root package clips the records
// Do builds, and the sinks of package deadletter (and pgdeadletter, through
// deadletter.Clip) clip the records they are given by hand. It is one
// rule in one place; both apply it, and applying it twice changes nothing.
package clip

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

const (
	// MaxText is the most bytes of one error text kept, the marker of a
	// cut included. A longer text keeps its first and last bytes, about
	// MaxText/2 of each (2,048 less half the marker), cut at UTF-8
	// boundaries, with a marker "…[N bytes cut]…" between.
	MaxText = 4096
	// MaxRecord is the most bytes of error text one record keeps, its
	// last error and every attempt's error together. Past it the
	// attempts in the middle are dropped, the first and the last kept.
	MaxRecord = 64 << 10
)

// Text returns s when it has at most MaxText bytes, else its first and
// last bytes with a marker saying how many bytes were cut between them,
// MaxText bytes at most in all. Cuts fall on UTF-8 boundaries (of valid
// UTF-8; invalid bytes may be cut anywhere). A text Text returned is
// returned unchanged.
func Text(s string) string {
	if len(s) <= MaxText {
		return s
	}
	room := MaxText - len(marker(len(s))) // the marker for at most len(s) bytes cut is no shorter than the real one
	head := back(s, room/2)
	tail := forward(s, len(s)-(room-room/2))
	return s[:head] + marker(tail-head) + s[tail:]
}

// marker is the text put in place of n cut bytes.
func marker(n int) string { return "…[" + strconv.Itoa(n) + " bytes cut]…" }

// back returns i, moved back to the start of the rune it falls in, and
// forward i moved on to the start of the next rune: at most
// utf8.UTFMax-1 bytes either way, so that invalid UTF-8 costs little.
func back(s string, i int) int {
	for j := i; j > i-utf8.UTFMax && j > 0; j-- {
		if utf8.RuneStart(s[j]) {
			return j
		}
	}
	return i
}

func forward(s string, i int) int {
	for j := i; j < i+utf8.UTFMax && j < len(s); j++ {
		if utf8.RuneStart(s[j]) {
			return j
		}
	}
	return i
}

// Record clips the error texts of one record: last (its LastError) and the
// text of each of errs (its attempts' errors), which text returns a
// pointer to, with Text, and then drops the attempts in the middle, keeping
// the first and the last ones alternately, until last and the kept texts
// add up to MaxRecord bytes at most. errs is never changed: when anything
// is clipped or dropped, the returned slice is a new one; else it is errs.
func Record[E any](last string, errs []E, text func(*E) *string) (string, []E) {
	last = Text(last)
	total := len(last)
	out, copied := errs, false // out is a copy of errs once copied
	for i := range out {
		t := *text(&out[i])
		if len(t) > MaxText {
			if !copied {
				out, copied = slices.Clone(errs), true
			}
			t = Text(t)
			*text(&out[i]) = t
		}
		total += len(t)
	}
	if total <= MaxRecord {
		return last, out
	}
	if !copied {
		out = slices.Clone(errs)
	}
	// Keep the first, the last, the second, the one before the last… while
	// they fit.
	room := MaxRecord - len(last)
	head, tail := 0, 0
	for head+tail < len(out) {
		i := head // the next from the front, or from the back
		if tail < head {
			i = len(out) - 1 - tail
		}
		n := len(*text(&out[i]))
		if n > room {
			break
		}
		room -= n
		if i == head {
			head++
		} else {
			tail++
		}
	}
	return last, append(out[:head], out[len(out)-tail:]...)
}
