package archive

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
)

// Filter selects records (see desk.ArchiveFilter).
type Filter = desk.ArchiveFilter

// Line is one record as read from the archive.
type Line struct {
	Day    string // "YYYY-MM-DD", from the file's directory
	File   string // slash path below the workspace's archive directory: "2026/03/14/feishu--oc_1.ndjson"
	Number int    // 1-based line number in the file
	Offset int64  // byte offset of the line in the file
	// Raw is the line exactly as stored, without its '\n': callers that
	// stream NDJSON to a client write Raw and a '\n'. It is only valid
	// during the callback.
	Raw    []byte
	Record Record
}

// Skipped is a line a reader did not deliver because it does not parse
// (see desk.ArchiveSkipped).
type Skipped = desk.ArchiveSkipped

// MaxSkippedListed bounds Summary.Skipped; SkippedTotal counts them all.
const MaxSkippedListed = 100

// Summary reports what a Read went through (see desk.ArchiveSummary).
type Summary = desk.ArchiveSummary

// skip counts k in s and lists it among the first MaxSkippedListed.
func skip(s *Summary, k Skipped) {
	s.SkippedTotal++
	if len(s.Skipped) < MaxSkippedListed {
		s.Skipped = append(s.Skipped, k)
	}
}

// MaxLineBytes is the longest line a reader accepts; a longer one is skipped
// and reported (the writer refuses records above Options.MaxRecordBytes).
const MaxLineBytes = 64 << 20

// FileInfo describes one archive file (see desk.ArchiveFile).
type FileInfo = desk.ArchiveFile

func (a *Archive) wsDir(ws string) (string, error) {
	if err := checkWorkspaceID(ws); err != nil {
		return "", err
	}
	return a.Dir(ws), nil
}

// Days lists the days ("YYYY-MM-DD", ascending) that have at least one
// archive file. A workspace without an archive has no days.
func (a *Archive) Days(ctx context.Context, ws string) ([]string, error) {
	dir, err := a.wsDir(ws)
	if err != nil {
		return nil, err
	}
	var days []string
	for _, y := range listDirs(dir, 4) {
		for _, m := range listDirs(filepath.Join(dir, y), 2) {
			for _, d := range listDirs(filepath.Join(dir, y, m), 2) {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				day := y + "-" + m + "-" + d
				if _, err := time.Parse(time.DateOnly, day); err != nil {
					continue
				}
				names, err := archiveFiles(filepath.Join(dir, y, m, d))
				if err != nil {
					return nil, err
				}
				if len(names) > 0 {
					days = append(days, day)
				}
			}
		}
	}
	return days, nil
}

// listDirs returns the sorted names of the subdirectories of dir made of
// exactly n digits; a missing dir has none.
func listDirs(dir string, n int) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && len(e.Name()) == n && strings.Trim(e.Name(), "0123456789") == "" {
			out = append(out, e.Name())
		}
	}
	return out
}

// archiveFiles returns the sorted .ndjson file names of a day directory.
func archiveFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ext) && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

func dayRel(day string) string { return strings.ReplaceAll(day, "-", "/") }

// List returns the archive files of one day ("YYYY-MM-DD"), or of every day
// when day is empty, in read order.
func (a *Archive) List(ctx context.Context, ws, day string) ([]FileInfo, error) {
	dir, err := a.wsDir(ws)
	if err != nil {
		return nil, err
	}
	days := []string{day}
	if day == "" {
		if days, err = a.Days(ctx, ws); err != nil {
			return nil, err
		}
	} else if _, err := time.Parse(time.DateOnly, day); err != nil {
		return nil, desk.Errorf(desk.EINVALID, "day %q is not YYYY-MM-DD", day)
	}
	var out []FileInfo
	for _, d := range days {
		names, err := archiveFiles(filepath.Join(dir, filepath.FromSlash(dayRel(d))))
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			fi := FileInfo{Day: d, File: path.Join(dayRel(d), n), Name: n}
			fi.Channel, fi.Conversation, _ = DecodeName(n)
			if st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(fi.File))); err == nil {
				fi.Size = st.Size()
			}
			out = append(out, fi)
		}
	}
	return out, nil
}

// Read streams the workspace's records that match f to fn, in order: day,
// then file name, then line. It never loads a whole file. Lines that do not
// parse (a crash fragment, an unterminated last line that a writer may still
// be completing) are skipped and reported in the Summary. An error from fn
// stops the read and is returned as is.
func (a *Archive) Read(ctx context.Context, ws string, f Filter, fn func(*Line) error) (Summary, error) {
	var sum Summary
	dir, err := a.wsDir(ws)
	if err != nil {
		return sum, err
	}
	days, err := a.Days(ctx, ws)
	if err != nil {
		return sum, err
	}
	// Day directories follow the configured location, which may have
	// changed over the archive's life: prune with a day of margin and let
	// each record's `at` decide.
	var fromDay, toDay string
	if !f.From.IsZero() {
		fromDay = f.From.In(a.opt.Location).AddDate(0, 0, -1).Format(time.DateOnly)
	}
	if !f.To.IsZero() {
		toDay = f.To.In(a.opt.Location).AddDate(0, 0, 1).Format(time.DateOnly)
	}
	exact := ""
	if f.Channel != "" && f.Conversation != "" {
		exact, _ = FileName(f.Channel, f.Conversation)
	}
	for _, day := range days {
		if fromDay != "" && day < fromDay || toDay != "" && day > toDay {
			continue
		}
		names, err := archiveFiles(filepath.Join(dir, filepath.FromSlash(dayRel(day))))
		if err != nil {
			return sum, err
		}
		for _, name := range names {
			if exact != "" && name != exact {
				continue
			}
			if exact == "" && (f.Channel != "" || f.Conversation != "") {
				if ch, conv, err := DecodeName(name); err == nil &&
					(f.Channel != "" && ch != f.Channel || f.Conversation != "" && conv != f.Conversation) {
					continue
				}
			}
			rel := path.Join(dayRel(day), name)
			_, err := scanFile(ctx, filepath.Join(dir, filepath.FromSlash(rel)), 0, -1, func(ln *Line) error {
				ln.Day, ln.File = day, rel
				if ln.Record == nil {
					return nil
				}
				e := ln.Record.Header()
				if f.Channel != "" && e.Channel != f.Channel || f.Conversation != "" && e.ConversationID != f.Conversation ||
					!f.From.IsZero() && e.At.Before(f.From) || !f.To.IsZero() && !e.At.Before(f.To) {
					return nil
				}
				sum.Records++
				return fn(ln)
			}, func(k Skipped) {
				k.File = rel
				skip(&sum, k)
			})
			sum.Files++
			if err != nil {
				return sum, err
			}
		}
	}
	return sum, nil
}

// scanFile streams the lines of one file from byte offset start up to end
// (-1: to EOF). Complete lines that parse reach fn with Record set;
// complete lines that do not parse reach skip. A final line without '\n'
// reaches skip only when end is -1 (a caller that gives end stops at a line
// boundary it knows). It returns the offset just after the last complete
// line it read, which is where an incremental reader resumes.
func scanFile(ctx context.Context, name string, start, end int64, fn func(*Line) error, skip func(Skipped)) (int64, error) {
	file, err := os.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return start, nil
		}
		return start, err
	}
	defer file.Close()
	if start > 0 {
		if _, err := file.Seek(start, io.SeekStart); err != nil {
			return start, err
		}
	}
	var r io.Reader = file
	if end >= 0 {
		r = io.LimitReader(file, end-start)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	off := start // start of the current line
	number := 0
	var long []byte   // the beginning of a line longer than the buffer
	var longBytes int // its length, even when too long to keep
	for {
		chunk, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if long != nil || longBytes == 0 {
				if longBytes+len(chunk) <= MaxLineBytes {
					long = append(long, chunk...)
				} else {
					long = nil // too long: only count it
				}
			}
			longBytes += len(chunk)
			continue
		}
		if err != nil && err != io.EOF {
			return off, err
		}
		if len(chunk) == 0 && longBytes == 0 {
			return off, nil // clean end of file
		}
		size := longBytes + len(chunk)
		line := chunk
		if longBytes > 0 {
			line = nil
			if long != nil {
				line = append(long, chunk...)
			}
		}
		long, longBytes = nil, 0
		number++
		if number%1024 == 0 {
			if e := ctx.Err(); e != nil {
				return off, e
			}
		}
		if err == io.EOF { // ReadSlice found no '\n' before the end
			// An unterminated final line: a crash fragment, or a write in
			// progress when the caller reads to EOF.
			if end < 0 {
				skip(Skipped{Line: number, Offset: off, Bytes: size,
					Reason: "unterminated final line (a crash fragment or a write in progress)"})
			}
			return off, nil
		}
		lineStart := off
		off += int64(size)
		var rec Record
		var perr error
		switch {
		case line == nil:
			perr = fmt.Errorf("line longer than %d bytes", MaxLineBytes)
		case len(bytes.TrimSpace(line)) == 0:
			perr = errors.New("empty line")
		default:
			rec, perr = ParseLine(line[:len(line)-1])
		}
		if perr != nil {
			skip(Skipped{Line: number, Offset: lineStart, Bytes: size - 1, Reason: perr.Error()})
			continue
		}
		ln := Line{Number: number, Offset: lineStart, Raw: line[:len(line)-1], Record: rec}
		if err := fn(&ln); err != nil {
			return off, err
		}
	}
}

var _ desk.ArchiveService = (*Archive)(nil)

// ReadRaw is Read for a caller that streams the records on as NDJSON:
// fn gets each line exactly as stored, without its '\n' (valid only
// during the call).
func (a *Archive) ReadRaw(ctx context.Context, ws string, f Filter, fn func(raw []byte) error) (Summary, error) {
	return a.Read(ctx, ws, f, func(l *Line) error { return fn(l.Raw) })
}
