package archive

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/layout"
)

func TestGroupCommit64Writers(t *testing.T) {
	e := newEnv(t, Options{})
	const writers, each = 64, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := fmt.Sprintf("g%02d-%03d", g, i)
				r := &MessageInbound{Envelope: env0(t0, "feishu", "oc_busy"), MessageID: id, Text: "concurrent " + id}
				if err := e.a.Append(context.Background(), testWS, r); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := writers * each
	seen := map[string]int{}
	lastOfWriter := map[string]int{}
	for _, l := range lines(e.readFile("2026/03/14/feishu--oc_busy.ndjson")) {
		r, err := ParseLine(l)
		if err != nil {
			t.Fatalf("line does not parse: %v", err)
		}
		id := r.(*MessageInbound).MessageID
		seen[id]++
		// One writer's records keep their order: it waits for each ack.
		g, n := id[:3], atoi(t, id[4:])
		if prev, ok := lastOfWriter[g]; ok && n != prev+1 {
			t.Fatalf("%s after %s-%03d", id, g, prev)
		}
		lastOfWriter[g] = n
	}
	if len(seen) != total {
		t.Fatalf("%d distinct records, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s written %d times", id, n)
		}
	}
	syncs := e.a.Syncs()
	t.Logf("%d records, %d fsyncs (%.1f records per fsync)", total, syncs, float64(total)/float64(syncs))
	if syncs == 0 || syncs*8 > uint64(total) {
		t.Fatalf("%d fsyncs for %d records: group commit is not batching", syncs, total)
	}
	if st := e.a.Stats(); st.Appended != uint64(total) {
		t.Fatalf("stats %+v", st)
	}
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestIdleCloseAndOpenFileCap: writers and descriptors go away when idle,
// and no more than MaxOpenFiles archive files are ever open, even with more
// conversations busy at once.
func TestIdleCloseAndOpenFileCap(t *testing.T) {
	e := newEnv(t, Options{MaxOpenFiles: 3, IdleClose: 30 * time.Millisecond})
	archiveDir := e.a.Dir(testWS)
	var maxOpen, maxFDs atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n := int64(e.a.Stats().OpenFiles); n > maxOpen.Load() {
				maxOpen.Store(n)
			}
			if n := int64(openFDsUnder(archiveDir)); n > maxFDs.Load() {
				maxFDs.Store(n)
			}
			// The sampling rate of the descriptor count, on purpose.
			time.Sleep(200 * time.Microsecond)
		}
	}()
	var wg sync.WaitGroup
	for c := 0; c < 12; c++ {
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 10; i++ {
					r := &MessageInbound{Envelope: env0(t0, "ch", fmt.Sprintf("conv%02d", c)), Text: fmt.Sprint(g, i)}
					if err := e.a.Append(context.Background(), testWS, r); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(stop)
	<-sampled
	// The descriptor scan is not atomic (files open and close while
	// /proc/self/fd is read), so it only gets a little slack; the archive's
	// own count is exact.
	if maxOpen.Load() > 3 || maxFDs.Load() > 4 {
		t.Fatalf("open files peaked at %d (descriptors seen %d), cap 3", maxOpen.Load(), maxFDs.Load())
	}
	t.Logf("open files peaked at %d (descriptors seen %d)", maxOpen.Load(), maxFDs.Load())
	if len(e.archiveFiles()) != 12 || e.a.Stats().Appended != 360 {
		t.Fatalf("files %v, stats %+v", e.archiveFiles(), e.a.Stats())
	}
	if !testwait.Poll(3*time.Second, func() bool {
		st := e.a.Stats()
		return st.Writers == 0 && st.OpenFiles == 0 && openFDsUnder(archiveDir) == 0
	}) {
		t.Fatalf("idle writers did not go away: %+v", e.a.Stats())
	}
	// And they come back on demand.
	e.append(&MessageInbound{Envelope: env0(t0, "ch", "conv00"), Text: "again"})
	if n := len(lines(e.readFile("2026/03/14/ch--conv00.ndjson"))); n != 31 {
		t.Fatalf("%d lines", n)
	}
}

// openFDsUnder counts this process's descriptors open on files below dir.
func openFDsUnder(dir string) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) && strings.HasSuffix(target, ".ndjson") {
			n++
		}
	}
	return n
}

func TestCloseFlushesAndStopsEverything(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	home := layout.Home{Root: t.TempDir()}
	if err := os.MkdirAll(home.Workspace(testWS), 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := Open(home, Options{ViewsInterval: 5 * time.Millisecond, IdleClose: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var acked atomic.Int64
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				r := &MessageInbound{Envelope: env0(t0, "ch", fmt.Sprintf("c%d", g%4)), Text: "x"}
				if err := a.Append(context.Background(), testWS, r); err != nil {
					t.Error(err)
					return
				}
				acked.Add(1)
			}
		}()
	}
	wg.Wait()
	view := filepath.Join(home.Workspace(testWS), ViewsDir, "ch--c0.md")
	testwait.Until(t, 5*time.Second, func() bool { _, err := os.Stat(view); return err == nil }, "the view updater to run once")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if st := a.Stats(); st.Writers != 0 || st.OpenFiles != 0 || st.Appended != uint64(acked.Load()) {
		t.Fatalf("after Close: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(home.Workspace(testWS), ViewsDir, "ch--c0.md")); err != nil {
		t.Fatalf("background view update did not run: %v", err)
	}
}

func TestCloseWorkspaceReleasesFiles(t *testing.T) {
	e := newEnv(t, Options{IdleClose: time.Hour})
	e.append(&MessageInbound{Envelope: env0(t0, "ch", "a"), Text: "x"})
	e.append(&MessageInbound{Envelope: env0(t0, "ch", "b"), Text: "x"})
	if n := openFDsUnder(e.a.Dir(testWS)); n != 2 {
		t.Fatalf("%d open", n)
	}
	if err := e.a.CloseWorkspace(context.Background(), testWS); err != nil {
		t.Fatal(err)
	}
	if n := openFDsUnder(e.a.Dir(testWS)); n != 0 || e.a.Stats().Writers != 0 {
		t.Fatalf("%d still open, %+v", n, e.a.Stats())
	}
}

// TestReopenTerminatesFragment: a file whose last line was cut by a crash
// gets a '\n' before the next record; nothing is truncated and the
// fragment is reported by readers.
func TestReopenTerminatesFragment(t *testing.T) {
	e := newEnv(t, Options{})
	e.append(&MessageInbound{Envelope: env0(t0, "ch", "x"), Text: "one"})
	if err := e.a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, _ := e.a.Path(testWS, "ch", "x", t0)
	before := e.readFile("2026/03/14/ch--x.ndjson")
	fragment := []byte(`{"schema_version":1,"at":"2026-03-14T09:3`)
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(fragment)
	f.Close()

	// Before any new writer: the fragment is an unterminated final line.
	a2, _ := Open(e.home, Options{ViewsInterval: -1})
	defer a2.Close(context.Background())
	sum, err := a2.Read(context.Background(), testWS, Filter{}, func(*Line) error { return nil })
	if err != nil || sum.Records != 1 || sum.SkippedTotal != 1 || sum.Skipped[0].Line != 2 ||
		!strings.Contains(sum.Skipped[0].Reason, "unterminated") {
		t.Fatalf("read before reopen: %+v %v", sum, err)
	}

	if err := a2.Append(context.Background(), testWS, &MessageInbound{Envelope: env0(t0, "ch", "x"), Text: "two"}); err != nil {
		t.Fatal(err)
	}
	after := e.readFile("2026/03/14/ch--x.ndjson")
	wantPrefix := append(append(append([]byte{}, before...), fragment...), '\n')
	if !strings.HasPrefix(string(after), string(wantPrefix)) {
		t.Fatalf("file was not extended as expected:\n%s", after)
	}
	var texts []string
	sum, err = a2.Read(context.Background(), testWS, Filter{}, func(l *Line) error {
		texts = append(texts, l.Record.(*MessageInbound).Text)
		return nil
	})
	if err != nil || strings.Join(texts, ",") != "one,two" || sum.SkippedTotal != 1 || sum.Skipped[0].Line != 2 ||
		sum.Skipped[0].File != "2026/03/14/ch--x.ndjson" || sum.Skipped[0].Offset != int64(len(before)) {
		t.Fatalf("read after reopen: %v %+v %v", texts, sum, err)
	}
	// A well-terminated file gets no extra newline.
	a2.Append(context.Background(), testWS, &MessageInbound{Envelope: env0(t0, "ch", "x"), Text: "three"})
	if got := e.readFile("2026/03/14/ch--x.ndjson"); strings.Contains(string(got), "\n\n") {
		t.Fatal("blank line written")
	}
}

const crashEnv = "DESK_ARCHIVE_CRASH_HOME"

// TestCrashChild is the child of TestCrashRecovery: it appends forever and
// prints each acknowledged record id. It does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	home := os.Getenv(crashEnv)
	if home == "" {
		t.Skip("child process of TestCrashRecovery")
	}
	run := os.Getenv("DESK_ARCHIVE_CRASH_RUN")
	// Never outlive a parent that failed to kill us.
	time.AfterFunc(20*time.Second, func() { os.Exit(4) })
	a, err := Open(layout.Home{Root: home}, Options{ViewsInterval: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				id := fmt.Sprintf("r%s-g%d-%d", run, g, i)
				r := &MessageInbound{Envelope: Envelope{Channel: "crash", ConversationID: fmt.Sprintf("c%d", g%2)},
					MessageID: id, Text: strings.Repeat("payload text ", 1+i%40)}
				if err := a.Append(context.Background(), testWS, r); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(3)
				}
				out.Lock()
				os.Stdout.WriteString(id + "\n")
				out.Unlock()
			}
		}()
	}
	wg.Wait()
}

// TestCrashRecovery kills a child that appends in a loop with SIGKILL 50
// times. Afterwards every acknowledged record is in the archive exactly
// once, and every line parses except at most one fragment per crash per
// file. SIGKILL alone does not tear a write() on a local file system, so the
// test also cuts a record in half after some crashes, as a power loss can.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	home := t.TempDir()
	if err := os.MkdirAll(layout.Home{Root: home}.Workspace(testWS), 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	acked := map[string]bool{}
	const crashes = 50
	torn := 0
	start := time.Now()
	for run := 0; run < crashes; run++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+home, "DESK_ARCHIVE_CRASH_RUN="+strconv.Itoa(run))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(stdout)
		first := make(chan struct{})
		done := make(chan []string)
		go func() {
			var ids []string
			for {
				// Only a complete line is an acknowledgement.
				l, err := br.ReadString('\n')
				if err != nil {
					break
				}
				if len(ids) == 0 {
					close(first)
				}
				ids = append(ids, strings.TrimSuffix(l, "\n"))
			}
			if len(ids) == 0 {
				close(first)
			}
			done <- ids
		}()
		<-first
		// A random crash point after the first acknowledged write, on
		// purpose: each round kills the child somewhere else.
		time.Sleep(time.Duration(rng.IntN(25)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		ids := <-done
		_ = cmd.Wait()
		if len(ids) == 0 {
			t.Fatalf("run %d: child acknowledged nothing; stderr:\n%s", run, stderr.String())
		}
		for _, id := range ids {
			acked[id] = true
		}
		if run%5 == 4 && tearOneFile(t, home, rng) {
			torn++
		}
	}
	t.Logf("%d crashes in %v, %d acknowledged records, %d torn tails", crashes, time.Since(start), len(acked), torn)

	a, err := Open(layout.Home{Root: home}, Options{ViewsInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	seen := map[string]int{}
	sum, err := a.Read(context.Background(), testWS, Filter{}, func(l *Line) error {
		seen[l.Record.(*MessageInbound).MessageID]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id := range acked {
		if seen[id] != 1 {
			t.Fatalf("acknowledged record %s present %d times", id, seen[id])
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("record %s present %d times", id, n)
		}
	}
	// SIGKILL can itself cut a large write() short (Linux stops copying
	// pages when a fatal signal is pending), so a file may hold a fragment
	// per crash, plus the ones the test cut by hand, and no more. Each
	// fragment is a line of its own: the records around it all parse.
	perFile := map[string]int{}
	for _, s := range sum.Skipped {
		perFile[s.File]++
	}
	for f, n := range perFile {
		if n > crashes+torn {
			t.Fatalf("%s: %d unparsable lines for %d crashes and %d torn tails", f, n, crashes, torn)
		}
	}
	if sum.SkippedTotal < torn || sum.SkippedTotal > crashes+torn || len(sum.Skipped) != sum.SkippedTotal {
		t.Fatalf("%d unparsable lines, %d crashes, %d torn tails: %+v", sum.SkippedTotal, crashes, torn, sum.Skipped)
	}
	t.Logf("%d unparsable lines: %d cut by the test, %d by SIGKILL", sum.SkippedTotal, torn, sum.SkippedTotal-torn)
	// Every unparsable line is a fragment that was later terminated (or is
	// the very last line).
	for _, s := range sum.Skipped {
		if !strings.Contains(s.Reason, "unterminated") && !strings.Contains(s.Reason, "not a record") {
			t.Fatalf("unexpected unparsable line: %+v", s)
		}
	}
}

// tearOneFile appends half a record without '\n' to one archive file, as
// a crash in the middle of a write can leave it. It picks a file whose last
// line is complete (an earlier tear not yet followed by a record would merge
// with this one) and reports whether it found one.
func tearOneFile(t *testing.T, home string, rng *rand.Rand) bool {
	var files []string
	_ = filepath.WalkDir(layout.Home{Root: home}.Abs(testWS, layout.ArchiveDir), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); len(b) > 0 && b[len(b)-1] == '\n' {
				files = append(files, p)
			}
		}
		return nil
	})
	if len(files) == 0 {
		return false
	}
	p := files[rng.IntN(len(files))]
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	half := `{"schema_version":1,"at":"2026-03-14T09:30:00Z","direction":"inbound","event_type":"message_inbound","channel":"crash","conv`
	if _, err := f.WriteString(half[:20+rng.IntN(len(half)-20)]); err != nil {
		t.Fatal(err)
	}
	return true
}
