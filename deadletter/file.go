package deadletter

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/steadfast-go/retry"
)

// FileOptions configures [OpenFile]. The zero value, like a nil pointer,
// gives the defaults.
type FileOptions struct {
	// Perm is the permission of a new file. Default: 0o600, because
	// payloads may hold personal data.
	Perm os.FileMode
	// SyncEach makes every Put write and fsync its record alone rather
	// than share a group commit (see Cost in the package doc). Default:
	// false.
	SyncEach bool
	// OnTorn, when set, is called with the torn lines of the file that
	// [FileSink.Pending] or [FileSink.Purge] skipped, which they do
	// without an error ([FileSink.List] returns them in its error), so
	// that they are not skipped without a word. It must not call the
	// sink. Default: nil, none.
	OnTorn func(*TornRecordError)
}

// FileSink is the embedded dead-letter store: an append-only, fsynced JSON
// Lines file, one record a line. Build one with [OpenFile] (the zero value
// is not usable) and Close it when done. It is safe for concurrent use;
// the package doc's "The file sink" section says what survives a crash
// and when several processes may share the file.
type FileSink struct {
	path     string
	syncEach bool
	onTorn   func(*TornRecordError)

	mu     sync.Mutex // guards cur and closed
	cur    *fileBatch // the batch new records join; nil when none is open
	closed bool

	wmu    sync.Mutex // held while writing; guards f and broken
	f      *os.File   // nil once closed
	broken error      // a failed fsync: what is on disk is unknown, so stop

	cmu   sync.Mutex      // guards state
	state map[string]bool // record ID -> marked, for the records seen so far by MarkRedriven
}

// fileBatch is a group of lines written and fsynced together.
type fileBatch struct {
	buf  []byte
	done chan struct{} // closed when err is set
	err  error
}

// OpenFile opens the JSON Lines file at path for appending, creating it if
// needed; opts may be nil. It ends a line a crash cut short, so new records
// start on a line of their own and readers report the torn one.
func OpenFile(path string, opts *FileOptions) (*FileSink, error) {
	var o FileOptions
	if opts != nil {
		o = *opts
	}
	if o.Perm == 0 {
		o.Perm = 0o600
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, o.Perm)
	if err != nil {
		return nil, fmt.Errorf("deadletter: opening file: %w", err)
	}
	s := &FileSink{path: path, syncEach: o.SyncEach, onTorn: o.OnTorn, f: f}
	if err := s.endTornLine(); err != nil {
		f.Close()
		return nil, fmt.Errorf("deadletter: opening file %s: %w", path, err)
	}
	syncDir(path) // make the file's directory entry durable too
	return s, nil
}

// syncDir fsyncs the directory of path, so that a new or renamed entry
// survives a crash.
func syncDir(path string) {
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync() // best effort: some systems cannot fsync a directory
		d.Close()
	}
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

// Put appends dl, [Clip]ped, as one line and returns once it is fsynced.
// dl.ID must not be empty and dl.Reason must be a failure outcome, or Put
// fails with an error wrapping retry.ErrInvalidOption. When ctx ends
// first, Put returns ctx's error and the record may or may not be stored
// (readers dedupe by ID).
func (s *FileSink) Put(ctx context.Context, dl retry.DeadLetter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl.ID == "" {
		// The reader keys records by ID: one without would be lost.
		return fmt.Errorf("%w: FileSink.Put: the dead letter has no ID", retry.ErrInvalidOption)
	}
	if !failure(dl.Reason) {
		// The reader would take its line for a torn one.
		return fmt.Errorf("%w: FileSink.Put: dead letter %s: its reason, outcome %d, is not a failure outcome", retry.ErrInvalidOption, dl.ID, uint8(dl.Reason))
	}
	dl = Clip(dl)
	line, err := json.Marshal(dl)
	if err != nil {
		return fmt.Errorf("deadletter: encoding dead letter %s: %w", dl.ID, err)
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
		return fmt.Errorf("deadletter: file %s is unusable after an earlier failure: %w", s.path, s.broken)
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
		return fmt.Errorf("deadletter: writing file: %w", err)
	}
	if err := s.f.Sync(); err != nil {
		// After a failed fsync the kernel may have dropped the dirty
		// pages: nothing written since the last good fsync is sure.
		s.broken = err
		return fmt.Errorf("deadletter: syncing file: %w", err)
	}
	return nil
}

func (s *FileSink) closedErr() error {
	return fmt.Errorf("deadletter: file %s: %w", s.path, os.ErrClosed)
}

// Close waits for the write in progress and closes the file; later Puts,
// MarkRedriven and Purge fail matching os.ErrClosed. It is idempotent.
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

// Pending returns the records never marked as redriven, in the order
// written; see [Source]. Torn lines are skipped and reported to
// FileOptions.OnTorn.
func (s *FileSink) Pending(ctx context.Context) ([]retry.DeadLetter, error) {
	var out []retry.DeadLetter
	err := s.ScanPending(ctx, func(dl retry.DeadLetter) error {
		out = append(out, dl)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScanPending calls fn with each record [FileSink.Pending] would return,
// in order, one at a time; see [PendingScanner]. Lines appended meanwhile
// are left out, so fn may call Put and MarkRedriven. Torn lines are
// reported to FileOptions.OnTorn before the first call. An error from fn
// stops ScanPending, which returns it.
func (s *FileSink) ScanPending(ctx context.Context, fn func(retry.DeadLetter) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	file, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("deadletter: reading file: %w", err)
	}
	defer file.Close()
	sel, torn, size, err := matchLines(file, Filter{State: Pending})
	if err != nil {
		return fmt.Errorf("deadletter: reading file %s: %w", s.path, err)
	}
	s.warnTorn(&torn)
	s.cmu.Lock()
	sel = slices.DeleteFunc(sel, func(e selected) bool { return s.state[e.id] })
	s.cmu.Unlock()
	return rereadLines(file, s.path, sel, size, fn)
}

// MarkRedriven appends a marker line for the record id and returns true
// once per id; see [Source]. Marks are atomic within this FileSink.
func (s *FileSink) MarkRedriven(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.cmu.Lock()
	marked, known := s.state[id]
	if !known {
		// Written since the last look (or never looked): look again.
		if err := s.loadLocked(); err != nil {
			s.cmu.Unlock()
			return false, err
		}
		marked, known = s.state[id]
	}
	if !known || marked {
		s.cmu.Unlock()
		return false, nil
	}
	s.state[id] = true // reserved: a concurrent MarkRedriven of id now fails
	s.cmu.Unlock()

	line, err := json.Marshal(markerLine{Redrive: &redriveMarker{ID: id, At: time.Now().UTC()}})
	if err == nil {
		err = s.append(ctx, append(line, '\n'))
	}
	if err != nil {
		s.cmu.Lock()
		s.state[id] = false
		s.cmu.Unlock()
		return false, fmt.Errorf("deadletter: marking dead letter %s: %w", id, err)
	}
	return true, nil
}

// loadLocked adds the records of the file that state does not know yet,
// holding their IDs only. Torn lines are ignored: a line being written
// now looks torn to a reader. The caller holds cmu.
func (s *FileSink) loadLocked() error {
	if s.state == nil {
		s.state = make(map[string]bool)
	}
	fresh := make(map[string]bool) // the IDs new to state -> marked
	err := inFile(s.path, func(f *os.File) error {
		_, _, err := scanLines(f, func(dl *retry.DeadLetter, _ int64) {
			if _, ok := s.state[dl.ID]; !ok {
				fresh[dl.ID] = false
			}
		}, func(m redriveMarker) {
			if _, ok := fresh[m.ID]; ok {
				fresh[m.ID] = true
			}
		})
		return err
	})
	if err != nil {
		return err
	}
	maps.Copy(s.state, fresh)
	return nil
}

// warnTorn reports torn lines to OnTorn, if any.
func (s *FileSink) warnTorn(t *tornLines) {
	if err := t.err(s.path); err != nil && s.onTorn != nil {
		s.onTorn(err.(*TornRecordError))
	}
}

// List returns the records f selects, as [Filter.Select] orders and
// limits them, with Redriven set for marked ones. When the file holds torn
// lines, List returns the records with a [*TornRecordError] naming them.
func (s *FileSink) List(ctx context.Context, f Filter) ([]retry.DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var recs []retry.DeadLetter
	err := ScanFile(s.path, f, func(dl retry.DeadLetter) error {
		recs = append(recs, dl)
		return nil
	})
	var torn *TornRecordError
	if err != nil && !errors.As(err, &torn) {
		return nil, err
	}
	return recs, err
}

// Purge deletes the records f selects (the zero Filter: all), with their
// copies and markers, and returns how many it deleted. Other lines are
// kept byte for byte, torn ones reported to FileOptions.OnTorn. Purge only
// while the sink is the file's one writer; see "The file sink".
func (s *FileSink) Purge(ctx context.Context, f Filter) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := f.Validate(); err != nil {
		return 0, err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	switch {
	case s.f == nil:
		return 0, s.closedErr()
	case s.broken != nil:
		return 0, fmt.Errorf("deadletter: file %s is unusable after an earlier failure: %w", s.path, s.broken)
	}
	sel, err := s.selectRecords(f)
	if err != nil || len(sel) == 0 {
		return 0, err
	}
	drop := make(map[string]bool, len(sel))
	for _, e := range sel {
		drop[e.id] = true
	}
	if err := s.rewrite(drop); err != nil {
		return 0, fmt.Errorf("deadletter: purging %s: %w", s.path, err)
	}
	s.cmu.Lock()
	for id := range drop {
		delete(s.state, id) // unknown now: MarkRedriven reports false
	}
	s.cmu.Unlock()
	return len(sel), nil
}

// selectRecords returns the records of the file that f selects, as
// Filter.Select would, and reports its torn lines to OnTorn. f is valid.
func (s *FileSink) selectRecords(f2 Filter) ([]selected, error) {
	var (
		sel  []selected
		torn tornLines
	)
	err := inFile(s.path, func(f *os.File) (err error) {
		sel, torn, _, err = selectLines(f, f2)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.warnTorn(&torn)
	return sel, nil
}

// rewrite replaces the file with a copy that lacks the lines of the
// records in drop, and makes the sink append to the copy. The caller holds
// wmu.
func (s *FileSink) rewrite(drop map[string]bool) error {
	old, err := os.Open(s.path)
	if err != nil {
		return err
	}
	defer old.Close()
	st, err := old.Stat()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), filepath.Base(s.path)+".purge-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing left to remove
	read, err := copyLines(tmp, old, drop)
	if err == nil {
		err = tmp.Chmod(st.Mode().Perm())
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// Another writer's lines appended since the copy would be lost.
	if now, err := os.Stat(s.path); err != nil || now.Size() != read {
		return errors.New("the file grew while purging, so nothing was purged: stop its other writers and try again")
	}
	// Open the copy before the rename, so that a failure leaves the old
	// file in place and in use.
	f, err := os.OpenFile(tmp.Name(), os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		f.Close()
		return err
	}
	syncDir(s.path)
	s.f.Close()
	s.f = f
	return nil
}

// copyLines copies the lines of src to dst except those of the records in
// drop, and returns how many bytes it read.
func copyLines(dst io.Writer, src io.Reader, drop map[string]bool) (int64, error) {
	br := bufio.NewReader(src)
	bw := bufio.NewWriter(dst)
	var n int64
	for {
		line, err := br.ReadBytes('\n')
		n += int64(len(line))
		if len(line) > 0 && !drop[lineID(line)] {
			if _, werr := bw.Write(line); werr != nil {
				return n, werr
			}
		}
		if err == io.EOF {
			return n, bw.Flush()
		}
		if err != nil {
			return n, err
		}
	}
}

var (
	_ Source         = (*FileSink)(nil)
	_ PendingScanner = (*FileSink)(nil)
)

// markerLine is the line that marks a record as redriven.
type markerLine struct {
	Redrive *redriveMarker `json:"redrive,omitempty"`
}

type redriveMarker struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}
