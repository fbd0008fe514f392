package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/layout"
)

// Options configure an Archive. The zero value is usable.
type Options struct {
	// Location decides the day directory of a record and the offset its
	// `at` is written with. The caller passes DESK_ARCHIVE_TZ; nil is UTC.
	Location *time.Location
	// IdleClose is how long a file's writer goroutine and descriptor stay
	// after its last append. Default 5s.
	IdleClose time.Duration
	// MaxOpenFiles caps the archive files held open at once (and so the
	// writers that can be committing at once). Default 64.
	MaxOpenFiles int
	// MaxRecordBytes refuses a larger encoded record. Default 16 MiB.
	MaxRecordBytes int
	// ViewsInterval is how often conversation views of workspaces that got
	// new records are brought up to date in the background. Default 2s;
	// negative turns background view updates off (RebuildViews still works).
	ViewsInterval time.Duration
	// Logger receives refusals and background failures. Default: discard.
	Logger *slog.Logger
	// Now is the archive's clock for records without At. Default time.Now.
	Now func() time.Time
}

// Stats are the archive's counters since Open.
type Stats struct {
	Appended  uint64 // records acknowledged durable
	Refused   uint64 // records refused for breaking the contract
	Syncs     uint64 // file fsyncs of record batches
	OpenFiles int    // archive files open now
	Writers   int    // writer goroutines alive now
}

// Archive is a workspace ledger writer and reader rooted at a desk home.
// It is safe for concurrent use.
type Archive struct {
	home layout.Home
	opt  Options
	log  *slog.Logger

	mu      sync.Mutex
	writers map[string]*fileWriter // by absolute file path
	closed  bool
	dirty   map[string]bool // workspaces with appends since the last view update

	slots       chan struct{} // one token per open file
	slotWaiters atomic.Int64
	stop        chan struct{}
	bg          context.Context // cancelled by Close, for background view updates
	cancel      context.CancelFunc
	wg          sync.WaitGroup

	appended, refused, syncs atomic.Uint64
	writerCount              atomic.Int64

	viewsMu sync.Mutex // one view rebuild at a time
}

// Open returns an archive rooted at home. It starts the background view
// updater (unless Options.ViewsInterval is negative); Close stops it and
// every file writer.
func Open(home layout.Home, opt Options) (*Archive, error) {
	if home.Root == "" {
		return nil, desk.Errorf(desk.EINVALID, "archive: empty home")
	}
	if opt.Location == nil {
		opt.Location = time.UTC
	}
	if opt.IdleClose <= 0 {
		opt.IdleClose = 5 * time.Second
	}
	if opt.MaxOpenFiles <= 0 {
		opt.MaxOpenFiles = 64
	}
	if opt.MaxRecordBytes <= 0 {
		opt.MaxRecordBytes = 16 << 20
	}
	if opt.ViewsInterval == 0 {
		opt.ViewsInterval = 2 * time.Second
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Archive{
		home:    home,
		opt:     opt,
		log:     log.With(desk.LogComponent, "archive"),
		writers: map[string]*fileWriter{},
		dirty:   map[string]bool{},
		slots:   make(chan struct{}, opt.MaxOpenFiles),
		stop:    make(chan struct{}),
	}
	a.bg, a.cancel = context.WithCancel(context.Background())
	if opt.ViewsInterval > 0 {
		a.wg.Add(1)
		go a.viewLoop()
	}
	return a, nil
}

// LoadLocation resolves the value of DESK_ARCHIVE_TZ: empty is UTC,
// otherwise an IANA name such as "Asia/Shanghai" or "Local".
func LoadLocation(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, desk.Errorf(desk.EINVALID, "DESK_ARCHIVE_TZ %q: %v", name, err)
	}
	return loc, nil
}

// Location is the archive's configured location.
func (a *Archive) Location() *time.Location { return a.opt.Location }

// Refused is the number of records refused for breaking the contract.
func (a *Archive) Refused() uint64 { return a.refused.Load() }

// Syncs is the number of fsyncs of record batches; with group commit it is
// far below the number of appends under concurrency.
func (a *Archive) Syncs() uint64 { return a.syncs.Load() }

// Stats returns the archive's counters.
func (a *Archive) Stats() Stats {
	return Stats{
		Appended:  a.appended.Load(),
		Refused:   a.refused.Load(),
		Syncs:     a.syncs.Load(),
		OpenFiles: len(a.slots),
		Writers:   int(a.writerCount.Load()),
	}
}

// Dir is the archive directory of a workspace.
func (a *Archive) Dir(ws string) string { return a.home.Abs(ws, layout.ArchiveDir) }

// Path returns where a record of the channel and conversation at the given
// time lives.
func (a *Archive) Path(ws, channel, conversation string, at time.Time) (string, error) {
	if err := checkWorkspaceID(ws); err != nil {
		return "", err
	}
	name, err := FileName(channel, conversation)
	if err != nil {
		return "", err
	}
	return filepath.Join(a.Dir(ws), at.In(a.opt.Location).Format("2006/01/02"), name), nil
}

func checkWorkspaceID(ws string) error {
	if ws == "" || ws == "." || ws == ".." {
		return desk.Errorf(desk.EINVALID, "archive: bad workspace id %q", ws)
	}
	for i := 0; i < len(ws); i++ {
		if !safeByte(ws[i]) {
			return desk.Errorf(desk.EINVALID, "archive: bad workspace id %q", ws)
		}
	}
	return nil
}

// Append writes one record to the workspace's archive and returns once it
// is durable (written and fsynced, and the file's directory entry too when
// the file is new). A record that breaks the contract is refused: the
// returned error is a *ContractError (desk code invalid), the refusal is
// logged and counted, and nothing is written. A zero At is stamped with the
// archive's clock (on the caller's record).
//
// If ctx ends while the record waits for its batch, Append returns the
// context's error and the record may or may not have been written; the
// same holds for an I/O error (an fsync failure leaves the outcome unknown).
func (a *Archive) Append(ctx context.Context, ws string, r Record) error {
	if err := checkWorkspaceID(ws); err != nil {
		return err
	}
	if r != nil && !isNilRecord(r) && r.Header().At.IsZero() {
		r.Header().At = a.opt.Now()
	}
	line, err := encode(ws, r, a.opt.Location)
	if err == nil && len(line) > a.opt.MaxRecordBytes {
		err = refuse("", "record is %d bytes, more than %d", len(line), a.opt.MaxRecordBytes)
	}
	if err != nil {
		a.refused.Add(1)
		et, st := "", ""
		if r != nil && !isNilRecord(r) {
			et, st = r.EventType(), r.SystemType()
		}
		a.log.Error("archive record refused", desk.LogWorkspaceID, ws, "event_type", et,
			"system_type", st, "record_type", fmt.Sprintf("%T", r), desk.LogErr, err)
		return err
	}
	e := r.Header()
	path, err := a.Path(ws, e.Channel, e.ConversationID, e.At)
	if err != nil {
		return err
	}
	req := &request{line: line, done: make(chan error, 1)}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return desk.Errorf(desk.EUNAVAILABLE, "archive is closed")
	}
	w := a.writers[path]
	if w == nil {
		w = &fileWriter{a: a, ws: ws, path: path, wake: make(chan struct{}, 1),
			evict: make(chan struct{}, 1), exited: make(chan struct{})}
		a.writers[path] = w
		a.wg.Add(1)
		a.writerCount.Add(1)
		go w.run()
	}
	w.queue = append(w.queue, req)
	if a.opt.ViewsInterval > 0 {
		a.dirty[ws] = true
	}
	a.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("archive append (the record may still be written): %w", ctx.Err())
	}
}

// CloseWorkspace flushes and closes every open file of a workspace, for the
// workspace lifecycle to call before it moves or removes the workspace's
// directory (an open descriptor would follow the moved file). Appends to the
// workspace that arrive afterwards open the files again.
func (a *Archive) CloseWorkspace(ctx context.Context, ws string) error {
	a.mu.Lock()
	var files []*fileWriter
	for _, w := range a.writers {
		if w.ws == ws {
			files = append(files, w)
		}
	}
	a.mu.Unlock()
	for _, w := range files {
		select {
		case w.evict <- struct{}{}:
		default:
		}
	}
	for _, w := range files {
		select {
		case <-w.exited:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close refuses new appends, writes and fsyncs every queued record, closes
// every file and stops every goroutine of the archive. If ctx ends first,
// Close returns its error and the remaining writers finish on their own.
func (a *Archive) Close(ctx context.Context) error {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.stop)
		a.cancel()
	}
	a.mu.Unlock()
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close archive: %w", ctx.Err())
	}
}

type request struct {
	line []byte
	done chan error
}

// fileWriter owns one archive file: a goroutine that takes everything queued
// while the previous write and fsync ran and commits it as one batch.
type fileWriter struct {
	a      *Archive
	ws     string
	path   string
	queue  []*request // guarded by a.mu
	hasFD  bool       // guarded by a.mu
	wake   chan struct{}
	evict  chan struct{}
	exited chan struct{}

	// Owned by the goroutine.
	f       *os.File
	needsNL bool
	idle    bool // idle for IdleClose: leave unless work arrives
	leave   bool // evicted or stopping: leave once the queue is empty
}

func (w *fileWriter) run() {
	a := w.a
	defer a.wg.Done()
	defer close(w.exited)
	defer a.writerCount.Add(-1)
	idle := time.NewTimer(a.opt.IdleClose)
	defer idle.Stop()
	var buf []byte
	for {
		a.mu.Lock()
		batch := w.queue
		w.queue = nil
		if len(batch) == 0 && (w.idle || w.leave) {
			delete(a.writers, w.path)
			a.mu.Unlock()
			w.closeFD()
			return
		}
		a.mu.Unlock()
		if len(batch) > 0 {
			buf = w.commit(batch, buf[:0])
			w.idle = false // busy again: stay for another idle period
			// Let the appenders just acknowledged queue their next records
			// before the next batch is taken; otherwise concurrent
			// appenders split into two alternating half-size batches.
			// With nobody else runnable this returns at once.
			runtime.Gosched()
			if cap(buf) > 1<<20 {
				buf = nil // do not pin a huge batch buffer
			}
			// Someone waits for a descriptor: give ours back between
			// batches so no file starves.
			if a.slotWaiters.Load() > 0 {
				w.closeFD()
			}
			continue
		}
		idle.Reset(a.opt.IdleClose)
		select {
		case <-w.wake:
		case <-idle.C:
			w.idle = true
		case <-w.evict:
			w.leave = true
		case <-a.stop:
			w.leave = true
		}
	}
}

// commit writes a batch as one write and one fsync and answers every
// request of it.
func (w *fileWriter) commit(batch []*request, buf []byte) []byte {
	a := w.a
	err := w.open()
	if err == nil {
		if w.needsNL {
			// A crash left an unterminated line: keep it, as its own line.
			buf = append(buf, '\n')
		}
		for _, r := range batch {
			buf = append(buf, r.line...)
		}
		_, err = w.f.Write(buf)
		if err == nil {
			w.needsNL = false
			err = w.f.Sync()
			a.syncs.Add(1)
		}
		if err != nil {
			// The file's tail is unknown now (a short write, a failed
			// fsync): close it, so the next open checks the last byte again.
			err = fmt.Errorf("archive %s: %w", filepath.Base(w.path), err)
			w.closeFD()
		}
	}
	if err == nil {
		a.appended.Add(uint64(len(batch)))
	}
	for _, r := range batch {
		r.done <- err
	}
	return buf
}

// open opens the file for appending, creating it (and its day directory)
// durably, and notes whether its last byte is a '\n'.
func (w *fileWriter) open() error {
	if w.f != nil {
		return nil
	}
	a := w.a
	// Never create a workspace directory: a departed or purged workspace
	// must not come back because a late record arrived.
	if _, err := os.Stat(a.home.Workspace(w.ws)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return desk.Errorf(desk.ENOTFOUND, "workspace %s has no directory", w.ws)
		}
		return err
	}
	dir := filepath.Dir(w.path)
	if err := mkdirDurable(dir); err != nil {
		return fmt.Errorf("archive day directory: %w", err)
	}
	a.acquireSlot()
	f, err := os.OpenFile(w.path, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o644)
	created := err == nil
	if errors.Is(err, fs.ErrExist) {
		f, err = os.OpenFile(w.path, os.O_RDWR|os.O_APPEND, 0)
	}
	if err != nil {
		<-a.slots
		return fmt.Errorf("open archive file: %w", err)
	}
	if created {
		if err := syncDir(dir); err != nil {
			f.Close()
			<-a.slots
			return fmt.Errorf("sync archive day directory: %w", err)
		}
	} else {
		nl, err := endsWithNewline(f)
		if err != nil {
			f.Close()
			<-a.slots
			return fmt.Errorf("read archive file tail: %w", err)
		}
		w.needsNL = !nl
	}
	w.f = f
	a.mu.Lock()
	w.hasFD = true
	a.mu.Unlock()
	return nil
}

func (w *fileWriter) closeFD() {
	if w.f == nil {
		return
	}
	w.f.Close()
	w.f = nil
	w.needsNL = false
	w.a.mu.Lock()
	w.hasFD = false
	w.a.mu.Unlock()
	<-w.a.slots
}

// acquireSlot takes an open-file token, asking idle writers to let go of
// theirs when none is free.
func (a *Archive) acquireSlot() {
	select {
	case a.slots <- struct{}{}:
		return
	default:
	}
	a.slotWaiters.Add(1)
	defer a.slotWaiters.Add(-1)
	a.mu.Lock()
	for _, w := range a.writers {
		if w.hasFD && len(w.queue) == 0 {
			select {
			case w.evict <- struct{}{}:
			default:
			}
		}
	}
	a.mu.Unlock()
	a.slots <- struct{}{}
}

func endsWithNewline(f *os.File) (bool, error) {
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	if st.Size() == 0 {
		return true, nil
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], st.Size()-1); err != nil && err != io.EOF {
		return false, err
	}
	return b[0] == '\n', nil
}

// mkdirDurable creates dir and its missing parents, fsyncing each parent
// after a child was created in it, so a new day directory survives a crash.
func mkdirDurable(dir string) error {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirDurable(parent); err != nil {
			return err
		}
	}
	// Sync the parent even when another writer created dir first: our
	// record must not be acknowledged before the entry is durable.
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
