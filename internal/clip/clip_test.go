package clip

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTextKeepsShortTexts(t *testing.T) {
	for _, s := range []string{"", "boom", strings.Repeat("x", MaxText)} {
		if got := Text(s); got != s {
			t.Errorf("Text of %d bytes changed it to %d bytes", len(s), len(got))
		}
	}
}

func TestTextKeepsHeadAndTail(t *testing.T) {
	s := "HEAD" + strings.Repeat("x", 10<<20) + "TAIL"
	got := Text(s)
	if len(got) > MaxText {
		t.Fatalf("clipped text has %d bytes, more than %d", len(got), MaxText)
	}
	if len(got) < MaxText-utf8.UTFMax {
		t.Errorf("clipped text has %d bytes: it should keep about %d", len(got), MaxText)
	}
	if !strings.HasPrefix(got, "HEAD") || !strings.HasSuffix(got, "TAIL") {
		t.Errorf("clipped text lost its head or tail: %.20q…%.20q", got, got[len(got)-20:])
	}
	head, rest, ok := strings.Cut(got, "…[")
	if !ok {
		t.Fatalf("no marker in the clipped text")
	}
	cut, tail, ok := strings.Cut(rest, " bytes cut]…")
	if !ok {
		t.Fatalf("no end of marker in the clipped text")
	}
	if want := len(s) - len(head) - len(tail); cut != strconv.Itoa(want) {
		t.Errorf("marker says %s bytes cut; %d were", cut, want)
	}
	if len(head) < 2000 || len(tail) < 2000 {
		t.Errorf("head %d and tail %d bytes: both should be about 2048", len(head), len(tail))
	}
	if again := Text(got); again != got {
		t.Errorf("Text of a clipped text changed it")
	}
}

func TestTextCutsAtRuneBoundaries(t *testing.T) {
	for _, r := range []string{"é", "€", "😀"} {
		for pad := range 4 {
			s := strings.Repeat("a", pad) + strings.Repeat(r, 3*MaxText)
			got := Text(s)
			if !utf8.ValidString(got) {
				t.Errorf("%q, pad %d: clipped text is not valid UTF-8", r, pad)
			}
			if len(got) > MaxText {
				t.Errorf("%q, pad %d: %d bytes", r, pad, len(got))
			}
		}
	}
	// Invalid UTF-8 is cut all the same, within bounds.
	if got := Text(strings.Repeat("\x80", 2*MaxText)); len(got) > MaxText {
		t.Errorf("invalid UTF-8: %d bytes", len(got))
	}
}

type attempt struct {
	n   int
	err string
}

func text(a *attempt) *string { return &a.err }

func TestRecordUnchangedReturnsTheSameSlice(t *testing.T) {
	errs := []attempt{{1, "a"}, {2, "b"}}
	last, got := Record("b", errs, text)
	if last != "b" || &got[0] != &errs[0] || len(got) != 2 {
		t.Errorf("a small record was changed or copied")
	}
	if allocs := testing.AllocsPerRun(100, func() { Record("b", errs, text) }); allocs != 0 {
		t.Errorf("Record of a small record allocated %v times", allocs)
	}
}

// The case of issue #20: a 10 MB error over 20 attempts.
func TestRecordBoundsTheRecord(t *testing.T) {
	big := strings.Repeat("x", 10<<20)
	errs := make([]attempt, 20)
	for i := range errs {
		errs[i] = attempt{i + 1, big}
	}
	last, got := Record(big, errs, text)
	total := len(last)
	for _, e := range got {
		if len(e.err) > MaxText {
			t.Errorf("attempt %d keeps %d bytes", e.n, len(e.err))
		}
		total += len(e.err)
	}
	if total > MaxRecord {
		t.Errorf("the record keeps %d bytes of error text, more than %d", total, MaxRecord)
	}
	if len(got) < 10 || got[0].n != 1 || got[len(got)-1].n != 20 {
		t.Errorf("kept %d attempts, first %d, last %d: want the first and the last ones", len(got), got[0].n, got[len(got)-1].n)
	}
	for i := 1; i < len(got); i++ {
		if got[i].n <= got[i-1].n {
			t.Errorf("attempts out of order: %d after %d", got[i].n, got[i-1].n)
		}
	}
	if len(errs[0].err) != len(big) || len(errs) != 20 {
		t.Errorf("the caller's slice was changed")
	}
	l2, again := Record(last, got, text)
	if l2 != last || len(again) != len(got) {
		t.Errorf("Record of a clipped record changed it")
	}
}

// Many small errors are dropped from the middle too.
func TestRecordDropsMiddleErrors(t *testing.T) {
	errs := make([]attempt, 1000)
	for i := range errs {
		errs[i] = attempt{i + 1, strings.Repeat("y", 100)}
	}
	_, got := Record("", errs, text)
	if len(got) != MaxRecord/100 {
		t.Errorf("kept %d attempts of 100 bytes, want %d", len(got), MaxRecord/100)
	}
	if got[0].n != 1 || got[len(got)-1].n != 1000 {
		t.Errorf("first %d, last %d", got[0].n, got[len(got)-1].n)
	}
}
