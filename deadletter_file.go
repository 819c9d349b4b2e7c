package retry

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// FileSinkOptions configures [OpenFileSink]. The zero value, like a nil
// pointer, gives the defaults.
type FileSinkOptions struct {
	// Perm is the permission of a new file. Default: 0o600, because
	// payloads may hold personal data.
	Perm os.FileMode
	// SyncEach makes every Put write and fsync its record alone. By
	// default concurrent Puts share one write and one fsync (group
	// commit), with the same guarantee and far more records a second; see
	// the benchmarks. Default: false.
	SyncEach bool
}

// FileSink is the embedded dead-letter store: an append-only JSON Lines
// file, one record a line, needing nothing but a disk. Build one with
// [OpenFileSink] (the zero value is not usable), read its file with
// [ReadDeadLetterFile], replay it with [Redrive], and Close it when done.
//
// Put returns nil only after the record's bytes were written and fsynced,
// so a record whose Put succeeded survives a crash of the process or the
// machine. Concurrent Puts are batched: the first Put of a batch writes and
// fsyncs the records that joined it while the previous fsync ran. Nothing
// is ever rewritten in place: [FileSink.Claim] appends a small marker line
// that the reader folds into the record's Redriven field.
//
// A FileSink is safe for concurrent use by many goroutines. Several
// processes may append to one file on a local file system (each batch is
// a single O_APPEND write, which Linux and macOS keep whole), but claims
// are atomic only within one FileSink: run one [Redrive] of a file at a
// time. Network file systems are not supported.
type FileSink struct {
	path     string
	syncEach bool

	mu     sync.Mutex // guards cur and closed
	cur    *fileBatch // the batch new records join; nil when none is open
	closed bool

	wmu    sync.Mutex // held while writing; guards f and broken
	f      *os.File   // nil once closed
	broken error      // a failed fsync: what is on disk is unknown, so stop

	cmu   sync.Mutex      // guards state
	state map[string]bool // record ID -> claimed, for the records seen so far by Claim
}

// fileBatch is a group of lines written and fsynced together.
type fileBatch struct {
	buf  []byte
	done chan struct{} // closed when err is set
	err  error
}

// OpenFileSink opens the JSON Lines file at path for appending, creating
// it if needed. opts may be nil. If the file ends in a line cut short by
// a crash, OpenFileSink ends that line, so that new records start on a
// line of their own and the reader reports the torn one.
func OpenFileSink(path string, opts *FileSinkOptions) (*FileSink, error) {
	var o FileSinkOptions
	if opts != nil {
		o = *opts
	}
	if o.Perm == 0 {
		o.Perm = 0o600
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, o.Perm)
	if err != nil {
		return nil, fmt.Errorf("retry: opening dead-letter file: %w", err)
	}
	s := &FileSink{path: path, syncEach: o.SyncEach, f: f}
	if err := s.endTornLine(); err != nil {
		f.Close()
		return nil, fmt.Errorf("retry: opening dead-letter file %s: %w", path, err)
	}
	// Make the file's directory entry durable too.
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync() // best effort: some systems cannot fsync a directory
		d.Close()
	}
	return s, nil
}

// endTornLine appends a newline when the file does not end with one.
func (s *FileSink) endTornLine() error {
	st, err := s.f.Stat()
	if err != nil {
		return err
	}
	if st.Size() == 0 {
		return nil
	}
	last := make([]byte, 1)
	if _, err := s.f.ReadAt(last, st.Size()-1); err != nil {
		return err
	}
	if last[0] == '\n' {
		return nil
	}
	return s.write([]byte("\n"))
}

// Path returns the file's path.
func (s *FileSink) Path() string { return s.path }

// Put appends dl as one line and returns after it is fsynced. dl.ID must
// not be empty (Do always sets it). When ctx ends first, Put returns ctx's
// error and the record may or may not be stored (the reader dedupes by
// ID). The Put that leads a batch finishes its write whatever ctx says,
// since the others wait on it; that is at most one fsync late.
func (s *FileSink) Put(ctx context.Context, dl DeadLetter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl.ID == "" {
		// The reader keys records by ID: one without would be lost.
		return fmt.Errorf("%w: FileSink.Put: the dead letter has no ID", ErrInvalidOption)
	}
	line, err := json.Marshal(dl)
	if err != nil {
		return fmt.Errorf("retry: encoding dead letter %s: %w", dl.ID, err)
	}
	return s.append(ctx, append(line, '\n'))
}

// append writes line durably, alone or in a batch.
func (s *FileSink) append(ctx context.Context, line []byte) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.closedErr()
	}
	if s.syncEach {
		s.mu.Unlock()
		s.wmu.Lock()
		defer s.wmu.Unlock()
		return s.write(line)
	}
	b, lead := s.cur, s.cur == nil
	if lead {
		b = &fileBatch{done: make(chan struct{})}
		s.cur = b
	}
	b.buf = append(b.buf, line...)
	s.mu.Unlock()

	if lead {
		// While the previous batch's fsync runs, later Puts join b.
		s.wmu.Lock()
		s.mu.Lock()
		s.cur = nil // b is full: the next Put opens a new batch
		s.mu.Unlock()
		b.err = s.write(b.buf)
		// Wake the followers before letting the next leader write, so
		// that their next Puts can still join its batch.
		close(b.done)
		s.wmu.Unlock()
		return b.err
	}
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// write appends buf and fsyncs. The caller holds wmu.
func (s *FileSink) write(buf []byte) error {
	switch {
	case s.f == nil:
		return s.closedErr()
	case s.broken != nil:
		return fmt.Errorf("retry: dead-letter file %s is unusable after an earlier failure: %w", s.path, s.broken)
	}
	n, err := s.f.Write(buf)
	if err != nil {
		// End a partial write's line, so that the next record starts on
		// a line of its own and the reader reports the torn one.
		// (Truncating instead could cut another process's records.)
		if n > 0 && buf[n-1] != '\n' {
			if _, lerr := s.f.Write([]byte("\n")); lerr != nil {
				s.broken = lerr
			}
		}
		return fmt.Errorf("retry: writing dead-letter file: %w", err)
	}
	if err := s.f.Sync(); err != nil {
		// After a failed fsync the kernel may have dropped the dirty
		// pages: nothing written since the last good fsync is sure.
		s.broken = err
		return fmt.Errorf("retry: syncing dead-letter file: %w", err)
	}
	return nil
}

func (s *FileSink) closedErr() error {
	return fmt.Errorf("retry: dead-letter file %s: %w", s.path, os.ErrClosed)
}

// Close waits for the write in progress, if any, and closes the file.
// Later Puts and Claims fail with an error matching os.ErrClosed. Close
// is idempotent.
func (s *FileSink) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// Pending returns the records that were never claimed for redrive, in the
// order they were written; see [RedriveSource]. Torn lines are skipped.
func (s *FileSink) Pending(ctx context.Context) ([]DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	recs, err := s.read()
	if err != nil {
		return nil, err
	}
	s.cmu.Lock()
	defer s.cmu.Unlock()
	out := recs[:0]
	for _, dl := range recs {
		if dl.Redriven.IsZero() && !s.state[dl.ID] {
			out = append(out, dl)
		}
	}
	return out, nil
}

// Claim marks the record id as redriven by appending a marker line, and
// returns true once per id; see [RedriveSource]. Claims are atomic within
// the process that owns the file.
func (s *FileSink) Claim(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.cmu.Lock()
	claimed, known := s.state[id]
	if !known {
		// Written since the last look (or never looked): look again.
		if err := s.loadLocked(); err != nil {
			s.cmu.Unlock()
			return false, err
		}
		claimed, known = s.state[id]
	}
	if !known || claimed {
		s.cmu.Unlock()
		return false, nil
	}
	s.state[id] = true // reserved: a concurrent Claim of id now fails
	s.cmu.Unlock()

	line, err := json.Marshal(markerLine{Redrive: &redriveMarker{ID: id, At: time.Now().UTC()}})
	if err == nil {
		err = s.append(ctx, append(line, '\n'))
	}
	if err != nil {
		s.cmu.Lock()
		s.state[id] = false
		s.cmu.Unlock()
		return false, fmt.Errorf("retry: claiming dead letter %s: %w", id, err)
	}
	return true, nil
}

// loadLocked adds the records of the file that state does not know yet.
// The caller holds cmu.
func (s *FileSink) loadLocked() error {
	recs, err := s.read()
	if err != nil {
		return err
	}
	if s.state == nil {
		s.state = make(map[string]bool, len(recs))
	}
	for _, dl := range recs {
		if _, ok := s.state[dl.ID]; !ok {
			s.state[dl.ID] = !dl.Redriven.IsZero()
		}
	}
	return nil
}

// read reads the whole file, ignoring torn lines: a line being written
// now looks torn to a reader.
func (s *FileSink) read() ([]DeadLetter, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("retry: reading dead-letter file: %w", err)
	}
	defer f.Close()
	recs, _, err := readDeadLetters(f)
	if err != nil {
		return nil, fmt.Errorf("retry: reading dead-letter file %s: %w", s.path, err)
	}
	return recs, nil
}

var _ RedriveSource = (*FileSink)(nil)

// markerLine is the line that marks a record as redriven.
type markerLine struct {
	Redrive *redriveMarker `json:"redrive,omitempty"`
}

type redriveMarker struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}
