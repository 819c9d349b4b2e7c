package deadletter

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/steadfast-go/retry"
)

// TornRecordError reports the lines of a dead-letter file that are not
// whole records; find it with errors.As. A crash in the middle of a write
// leaves one at the end of the file; [OpenFile] then ends it, so after a
// restart it may sit between whole records. No record whose Put succeeded
// is ever torn: Put returns only after its whole line is fsynced.
type TornRecordError struct {
	Path    string  // the file, as given to ReadFile or OpenFile
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
	return fmt.Sprintf("deadletter: file %s: %d torn %s skipped, at byte offset %s", e.Path, len(e.Offsets), noun, strings.Join(offs, ", "))
}

// ReadFile reads a file written by a [FileSink], without opening it for
// writing: every whole record, in the order written, with Redriven set for
// the records that [Redrive] marked. A record written twice (a Put that
// timed out after its write and was repeated) is returned once.
//
// Lines that are not whole records are skipped and reported in a
// [*TornRecordError], returned together with the records: a crash costs
// only the record being written, never the file. Any other error means
// the file could not be read, and no records are returned.
func ReadFile(path string) ([]retry.DeadLetter, error) {
	recs, torn, err := readFile(path)
	if err != nil {
		return nil, err
	}
	if len(torn) > 0 {
		return recs, &TornRecordError{Path: path, Offsets: torn}
	}
	return recs, nil
}

// readFile reads the file at path and returns its records and the offsets
// of its torn lines.
func readFile(path string) (recs []retry.DeadLetter, torn []int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("deadletter: reading file: %w", err)
	}
	defer f.Close()
	recs, torn, err = readDeadLetters(f)
	if err != nil {
		return nil, nil, fmt.Errorf("deadletter: reading file %s: %w", path, err)
	}
	return recs, torn, nil
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

// readDeadLetters parses JSON Lines from r, folds the redrive markers
// into their records and returns the offsets of the lines it could not
// parse.
func readDeadLetters(r io.Reader) (recs []retry.DeadLetter, torn []int64, err error) {
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
