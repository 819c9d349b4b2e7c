package retry

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ErrTornRecord is matched by the [*TornRecordError] of
// [ReadDeadLetterFile].
var ErrTornRecord = errors.New("retry: torn dead-letter record")

// TornRecordError reports the lines of a dead-letter file that are not
// whole records. A crash in the middle of a write leaves one at the end of
// the file; [OpenFileSink] then ends it, so after a restart it may sit
// between whole records. No record whose Put succeeded is ever torn: Put
// returns only after its whole line is fsynced.
type TornRecordError struct {
	Path    string  // the file, as given to ReadDeadLetterFile
	Offsets []int64 // byte offset of each torn line in the file
}

// Error names the file, the number of torn lines and their offsets.
func (e *TornRecordError) Error() string {
	offs := make([]string, len(e.Offsets))
	for i, o := range e.Offsets {
		offs[i] = strconv.FormatInt(o, 10)
	}
	noun := "records"
	if len(e.Offsets) == 1 {
		noun = "record"
	}
	return fmt.Sprintf("retry: dead-letter file %s: %d torn %s skipped, at byte offset %s", e.Path, len(e.Offsets), noun, strings.Join(offs, ", "))
}

// Unwrap returns [ErrTornRecord].
func (e *TornRecordError) Unwrap() error { return ErrTornRecord }

// ReadDeadLetterFile reads a file written by a [FileSink]: every whole
// record, in the order written, with Redriven set for the records that
// [Redrive] claimed. A record written twice (a Put that timed out after
// its write and was repeated) is returned once.
//
// Lines that are not whole records are skipped and reported in a
// [*TornRecordError] (matching [ErrTornRecord]), returned together with
// the records: a crash costs only the record being written, never the
// file. Any other error means the file could not be read, and no records
// are returned.
func ReadDeadLetterFile(path string) ([]DeadLetter, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("retry: reading dead-letter file: %w", err)
	}
	defer f.Close()
	recs, torn, err := readDeadLetters(f)
	if err != nil {
		return nil, fmt.Errorf("retry: reading dead-letter file %s: %w", path, err)
	}
	if len(torn) > 0 {
		return recs, &TornRecordError{Path: path, Offsets: torn}
	}
	return recs, nil
}

// fileLine is any line of the file: a DeadLetter or a redrive marker.
type fileLine struct {
	DeadLetter
	markerLine
}

// readDeadLetters parses JSON Lines from r, folds the redrive markers
// into their records and returns the offsets of the lines it could not
// parse.
func readDeadLetters(r io.Reader) (recs []DeadLetter, torn []int64, err error) {
	br := bufio.NewReader(r)
	index := make(map[string]int) // record ID -> index in recs
	var marks []redriveMarker
	var off int64
	for {
		line, rerr := br.ReadBytes('\n')
		if rerr != nil && rerr != io.EOF {
			return nil, nil, rerr
		}
		start := off
		off += int64(len(line))
		if len(bytes.TrimSpace(line)) > 0 {
			var l fileLine
			switch err := json.Unmarshal(line, &l); {
			case err == nil && l.Redrive != nil && l.Redrive.ID != "":
				marks = append(marks, *l.Redrive)
			case err == nil && l.ID != "":
				if _, dup := index[l.ID]; !dup {
					index[l.ID] = len(recs)
					recs = append(recs, l.DeadLetter)
				}
			default:
				torn = append(torn, start)
			}
		}
		if rerr == io.EOF {
			break
		}
	}
	for _, m := range marks {
		if i, ok := index[m.ID]; ok && recs[i].Redriven.IsZero() {
			recs[i].Redriven = m.At
		}
	}
	return recs, torn, nil
}
