package deadletter

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/steadfast-go/retry"
)

// maxTornShown is how many torn lines a [TornRecordError] names.
const maxTornShown = 8

// TornRecordError reports the lines of a dead-letter file that are not
// whole records (find it with errors.As): it counts them all and names
// the first 8. A crash mid-write leaves one, which may later sit between
// whole records; no record whose Put succeeded is ever torn.
type TornRecordError struct {
	Path    string  // the file, as given to ReadFile or OpenFile
	Count   int     // how many lines are torn; at least len(Offsets)
	Offsets []int64 // the byte offset in the file of each of the first 8 torn lines
	Lines   []int   // the line number (from 1) of each of the first 8 torn lines
}

// Error names the file, the number of torn lines and where the first of
// them are.
func (e *TornRecordError) Error() string {
	n := max(e.Count, len(e.Offsets))
	noun := "records"
	if n == 1 {
		noun = "record"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "deadletter: file %s: %d torn %s skipped, at byte offset ", e.Path, n, noun)
	for i, o := range e.Offsets {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(o, 10))
	}
	if len(e.Lines) > 0 {
		b.WriteString(" (line")
		if len(e.Lines) > 1 {
			b.WriteString("s")
		}
		for i, l := range e.Lines {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(" " + strconv.Itoa(l))
		}
		b.WriteString(")")
	}
	if more := n - len(e.Offsets); more > 0 {
		fmt.Fprintf(&b, " and %d more", more)
	}
	return b.String()
}

// tornLines counts the torn lines of a file and keeps where the first
// maxTornShown are.
type tornLines struct {
	count   int
	offsets []int64
	lines   []int
}

func (t *tornLines) add(off int64, line int) {
	t.count++
	if len(t.offsets) < maxTornShown {
		t.offsets = append(t.offsets, off)
		t.lines = append(t.lines, line)
	}
}

// err returns the *TornRecordError of the file at path, or nil when no
// line is torn.
func (t *tornLines) err(path string) error {
	if t.count == 0 {
		return nil
	}
	return &TornRecordError{Path: path, Count: t.count, Offsets: t.offsets, Lines: t.lines}
}

// ReadFile reads a [FileSink]'s file without opening it for writing: each
// whole record once, in the order written, with Redriven set for marked
// ones. Torn lines are skipped and reported in a [*TornRecordError]
// returned with the records; any other error means no records.
func ReadFile(path string) ([]retry.DeadLetter, error) {
	recs, torn, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return recs, torn.err(path)
}

// readFile reads the file at path and returns its records and its torn
// lines.
func readFile(path string) (recs []retry.DeadLetter, torn tornLines, err error) {
	index := make(map[string]int) // record ID -> index in recs
	err = inFile(path, func(f *os.File) (err error) {
		torn, _, err = scanLines(f, func(dl *retry.DeadLetter, _ int64) {
			index[dl.ID] = len(recs)
			recs = append(recs, *dl)
		}, func(m redriveMarker) {
			if i, ok := index[m.ID]; ok && recs[i].Redriven.IsZero() {
				recs[i].Redriven = m.At
			}
		})
		return err
	})
	if err != nil {
		return nil, torn, err
	}
	return recs, torn, nil
}

// inFile opens the file at path for reading and calls fn with it. Its
// errors, and fn's, say which file.
func inFile(path string, fn func(*os.File) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("deadletter: reading file: %w", err)
	}
	defer f.Close()
	if err := fn(f); err != nil {
		return fmt.Errorf("deadletter: reading file %s: %w", path, err)
	}
	return nil
}

// ScanFile calls fn with each record of the file at path that f selects,
// one at a time, as [FileSink.List] returns them, without opening the file
// for writing; records appended meanwhile are left out. An error from fn
// stops it and is returned; torn lines give a [*TornRecordError] after
// every whole record was passed. Any other error: the file was unreadable.
func ScanFile(path string, f Filter, fn func(retry.DeadLetter) error) error {
	if err := f.Validate(); err != nil {
		return err
	}
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("deadletter: reading file: %w", err)
	}
	defer file.Close()
	sel, torn, size, err := selectLines(file, f)
	if err != nil {
		return fmt.Errorf("deadletter: reading file %s: %w", path, err)
	}
	if err := rereadLines(file, path, sel, size, fn); err != nil {
		return err
	}
	return torn.err(path)
}

// rereadLines calls fn with the record of each entry of sel, read again
// from file (the file at path, size bytes long when sel was made) at the
// entry's offset, with Redriven set from the entry. Lines are only ever
// appended to a file, and a purge replaces the file rather than change
// it, so what file holds up to size stays put. When fn returns an error,
// rereadLines stops and returns it.
func rereadLines(file *os.File, path string, sel []selected, size int64, fn func(retry.DeadLetter) error) error {
	var (
		buf []byte
		err error
	)
	br := bufio.NewReader(nil)
	for _, e := range sel {
		// Read the line again where the first pass found it.
		br.Reset(io.NewSectionReader(file, e.off, size-e.off))
		if buf, err = readLine(br, buf); err != nil && err != io.EOF {
			return fmt.Errorf("deadletter: reading file %s: %w", path, err)
		}
		var l fileLine
		if err := json.Unmarshal(buf, &l); err != nil || l.ID != e.id {
			return fmt.Errorf("deadletter: reading file %s: the line at byte offset %d changed while it was read", path, e.off)
		}
		l.DeadLetter.Redriven = e.redriven
		if err := fn(l.DeadLetter); err != nil {
			return err
		}
	}
	return nil
}

// selected is a record of a file that a Filter selects: what it takes to
// order it and read it again.
type selected struct {
	id       string
	gaveUp   time.Time
	redriven time.Time
	off      int64 // the start of its line in the file
}

// selectLines reads r and returns the records f selects, in the order of
// Filter.Select, without holding them, its torn lines and how many bytes
// it read. f is valid.
func selectLines(r io.Reader, f Filter) (sel []selected, torn tornLines, n int64, err error) {
	sel, torn, n, err = matchLines(r, f) // ignores f.Limit
	if err != nil {
		return nil, torn, n, err
	}
	slices.SortStableFunc(sel, func(a, b selected) int {
		return oldestFirst(a.gaveUp, a.id, b.gaveUp, b.id)
	})
	if f.Limit > 0 && len(sel) > f.Limit {
		sel = sel[:f.Limit]
	}
	return sel, torn, n, nil
}

// matchLines reads r and returns the records f matches, ignoring
// f.Limit, in the order of the file, without holding them, its torn lines
// and how many bytes it read. f is valid.
func matchLines(r io.Reader, f Filter) (sel []selected, torn tornLines, n int64, err error) {
	state := f.State
	f.State, f.Limit = AnyState, 0 // the marks may come later: state waits for them
	index := make(map[string]int)  // record ID -> index in sel
	torn, n, err = scanLines(r, func(dl *retry.DeadLetter, off int64) {
		if f.Match(*dl) {
			index[dl.ID] = len(sel)
			sel = append(sel, selected{id: dl.ID, gaveUp: dl.GaveUp, off: off})
		}
	}, func(m redriveMarker) {
		if i, ok := index[m.ID]; ok && sel[i].redriven.IsZero() {
			sel[i].redriven = m.At
		}
	})
	if err != nil {
		return nil, torn, n, err
	}
	sel = slices.DeleteFunc(sel, func(e selected) bool {
		return state == Pending && !e.redriven.IsZero() || state == Redriven && e.redriven.IsZero()
	})
	return sel, torn, n, nil
}

// fileLine is any line of the file: a DeadLetter or a redrive marker.
type fileLine struct {
	retry.DeadLetter
	markerLine
}

// lineID returns the record ID a line is about: a record's ID or a
// redrive marker's; "" for a torn line.
func lineID(line []byte) string {
	var l fileLine
	if json.Unmarshal(line, &l) != nil {
		return ""
	}
	if l.Redrive != nil {
		return l.Redrive.ID
	}
	return l.ID
}

// scanLines parses the JSON Lines of r, one line in memory at a time. It
// calls rec with the first record of each ID and the offset of its line,
// and mark with each redrive marker, in the order of the file; dl is
// valid only during the call. It returns the lines it could not parse and
// how many bytes it read.
func scanLines(r io.Reader, rec func(dl *retry.DeadLetter, off int64), mark func(redriveMarker)) (torn tornLines, off int64, err error) {
	br := bufio.NewReader(r)
	seen := make(map[string]struct{})
	var (
		buf []byte
		l   fileLine // one for all lines: it escapes to the heap
	)
	for n := 1; ; n++ {
		buf, err = readLine(br, buf)
		if err != nil && err != io.EOF {
			return torn, off, err
		}
		line := buf
		start := off
		off += int64(len(line))
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			l = fileLine{}
			switch err := unmarshalLine(trimmed, &l); {
			case err == nil && l.Redrive != nil && l.Redrive.ID != "":
				mark(*l.Redrive)
			case err == nil && l.ID != "":
				if _, dup := seen[l.ID]; !dup {
					seen[l.ID] = struct{}{}
					rec(&l.DeadLetter, start)
				}
			default:
				torn.add(start, n)
			}
		}
		if err == io.EOF {
			return torn, off, nil
		}
	}
}

// unmarshalLine decodes a line of the file, a JSON object, into l. What
// is not an object fails at once, without json's work.
func unmarshalLine(line []byte, l *fileLine) error {
	if line[0] != '{' {
		return errNotObject
	}
	return json.Unmarshal(line, l)
}

var errNotObject = errors.New("not a JSON object")

// readLine reads the next line of br, its '\n' included, into buf, whose
// memory it reuses, and returns it. At the end of br it returns the last
// line, if any, and io.EOF.
func readLine(br *bufio.Reader, buf []byte) ([]byte, error) {
	buf = buf[:0]
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, err
		}
	}
}
