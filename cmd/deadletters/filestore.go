package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgdeadletter"
)

// fileStore is a JSON Lines file written by retry.FileSink.
type fileStore struct {
	path string
	warn io.Writer
	sink *retry.FileSink // opened by source
}

// read returns every record of the file, reporting torn lines to warn.
func (s *fileStore) read() ([]retry.DeadLetter, error) {
	recs, err := retry.ReadDeadLetterFile(s.path)
	if tr := (*retry.TornRecordError)(nil); errors.As(err, &tr) {
		fmt.Fprintf(s.warn, "deadletters: warning: %v\n", err)
		return recs, nil
	}
	return recs, err
}

func (s *fileStore) list(_ context.Context, f pgdeadletter.Filter) ([]retry.DeadLetter, error) {
	recs, err := s.read()
	if err != nil {
		return nil, err
	}
	return f.Select(recs)
}

func (s *fileStore) get(_ context.Context, id string) (retry.DeadLetter, error) {
	recs, err := s.read()
	if err != nil {
		return retry.DeadLetter{}, err
	}
	for _, dl := range recs {
		if dl.ID == id {
			return dl, nil
		}
	}
	return retry.DeadLetter{}, fmt.Errorf("%w: %s", errNotFound, id)
}

// purge rewrites the file without the lines of the records f selects:
// the records themselves, their copies and their redrive markers. Every
// other line, torn ones included, is kept byte for byte. The new file
// replaces the old one atomically, and only if the old one did not grow
// meanwhile.
func (s *fileStore) purge(ctx context.Context, f pgdeadletter.Filter) (int, error) {
	recs, err := s.list(ctx, f)
	if err != nil || len(recs) == 0 {
		return 0, err
	}
	drop := make(map[string]bool, len(recs))
	for _, dl := range recs {
		drop[dl.ID] = true
	}
	old, err := os.Open(s.path)
	if err != nil {
		return 0, err
	}
	defer old.Close()
	st, err := old.Stat()
	if err != nil {
		return 0, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), filepath.Base(s.path)+".purge-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
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
		return 0, fmt.Errorf("rewriting %s: %w", s.path, err)
	}
	// A writer that appended since we read would lose its lines.
	if now, err := os.Stat(s.path); err != nil || now.Size() != read {
		return 0, fmt.Errorf("%s changed while purging; nothing was purged: stop its writer and try again", s.path)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return 0, err
	}
	if d, err := os.Open(filepath.Dir(s.path)); err == nil {
		_ = d.Sync() // best effort: make the rename durable
		d.Close()
	}
	return len(recs), nil
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

// lineID returns the record ID a line of a dead-letter file is about: a
// record's ID or a redrive marker's. It is "" for torn lines.
func lineID(line []byte) string {
	var l struct {
		ID      string `json:"id"`
		Redrive *struct {
			ID string `json:"id"`
		} `json:"redrive"`
	}
	if json.Unmarshal(bytes.TrimSpace(line), &l) != nil {
		return ""
	}
	if l.Redrive != nil {
		return l.Redrive.ID
	}
	return l.ID
}

func (s *fileStore) source(context.Context) (retry.RedriveSource, error) {
	// Redrive on a file that does not exist is a mistake, not a new file.
	if _, err := os.Stat(s.path); err != nil {
		return nil, err
	}
	sink, err := retry.OpenFileSink(s.path, nil)
	if err != nil {
		return nil, err
	}
	s.sink = sink
	return sink, nil
}

func (s *fileStore) close() error {
	if s.sink == nil {
		return nil
	}
	return s.sink.Close()
}
