// Package artifacts benchmarks artifact transfer through desk's HTTP API
// against a plain file copy of the same bytes on the same disk, and measures
// the server's peak memory while it receives uploads of different sizes (it
// must stream: memory stays flat as the size grows).
//
// The server is the real desk binary, built once and run as a child process,
// so its memory is measured alone:
//
//	go test -run '^$' -bench . -benchtime 3x ./bench/artifacts
package artifacts

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const mib = 1 << 20

var (
	binDir  string
	deskBin string
)

func TestMain(m *testing.M) {
	var err error
	binDir, err = os.MkdirTemp("", "desk-bench-")
	if err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

var buildOnce sync.Once

// desk builds the desk binary once per test process.
func desk(tb testing.TB) string {
	buildOnce.Do(func() {
		deskBin = filepath.Join(binDir, "desk")
		cmd := exec.Command("go", "build", "-o", deskBin, "github.com/desk-runtime/desk/cmd/desk")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			deskBin = ""
		}
	})
	if deskBin == "" {
		tb.Fatal("building desk failed")
	}
	return deskBin
}

// server is a desk child process.
type server struct {
	url, token string
	cmd        *exec.Cmd
	ses        string
}

var urlLine = regexp.MustCompile(`url=(http://[0-9.:]+)`)

func startServer(tb testing.TB, home string) *server {
	tb.Helper()
	s := &server{token: "bench-admin-token"}
	s.cmd = exec.Command(desk(tb), "serve", "--home", home, "--addr", "127.0.0.1:0")
	s.cmd.Env = append(os.Environ(), "DESK_ADMIN_TOKEN="+s.token, "DESK_LOG_LEVEL=info")
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := urlLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case s.url = <-found:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		tb.Fatal("desk did not start")
	}
	tb.Cleanup(func() {
		s.cmd.Process.Signal(os.Interrupt)
		s.cmd.Wait()
	})
	ws := s.json(tb, "POST", "/v1/workspaces", `{"name":"bench"}`)
	s.ses = s.json(tb, "POST", "/v1/workspaces/"+ws+"/sessions", `{}`)
	return s
}

var idField = regexp.MustCompile(`"id":"([^"]+)"`)

func (s *server) json(tb testing.TB, method, path, body string) string {
	tb.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		tb.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, b)
	}
	m := idField.FindSubmatch(b)
	if m == nil {
		tb.Fatalf("no id in %s", b)
	}
	return string(m[1])
}

// upload streams the file at p as a new artifact and returns its id.
func (s *server) upload(tb testing.TB, p, name string) string {
	tb.Helper()
	f, err := os.Open(p)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	req, _ := http.NewRequest("POST", s.url+"/v1/sessions/"+s.ses+"/artifacts?name="+name, f)
	req.ContentLength = st.Size()
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 {
		tb.Fatalf("upload = %d %s", resp.StatusCode, b)
	}
	return string(idField.FindSubmatch(b)[1])
}

// download streams an artifact into a new file at dst and fsyncs it.
func (s *server) download(tb testing.TB, art, dst string) int64 {
	tb.Helper()
	req, _ := http.NewRequest("GET", s.url+"/v1/sessions/"+s.ses+"/artifacts/"+art+"/content", nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		tb.Fatalf("download = %d", resp.StatusCode)
	}
	return writeSynced(tb, dst, resp.Body)
}

// writeSynced copies r into a new file at dst through a 1 MiB buffer and
// fsyncs it: the same work as `dd bs=1M conv=fsync`, and what the download
// and the buffered-copy baseline both do on the receiving side.
func writeSynced(tb testing.TB, dst string, r io.Reader) int64 {
	f, err := os.Create(dst)
	if err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, mib)
	n, err := io.CopyBuffer(struct{ io.Writer }{f}, struct{ io.Reader }{r}, buf)
	if err != nil {
		tb.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		tb.Fatal(err)
	}
	f.Close()
	return n
}

// sourceFile writes size random bytes into dir once and returns the path.
func sourceFile(tb testing.TB, dir string, size int64) string {
	tb.Helper()
	p := filepath.Join(dir, fmt.Sprintf("src-%d.bin", size))
	if st, err := os.Stat(p); err == nil && st.Size() == size {
		return p
	}
	f, err := os.Create(p)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		tb.Fatal(err)
	}
	f.Sync()
	f.Close()
	return p
}

// vmHWM reads the peak resident set size of a process in KiB.
func vmHWM(tb testing.TB, pid int) int64 {
	tb.Helper()
	return procStatus(tb, pid, "VmHWM:")
}

func vmRSS(tb testing.TB, pid int) int64 { return procStatus(tb, pid, "VmRSS:") }

func procStatus(tb testing.TB, pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key) {
			f := strings.Fields(line)
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	tb.Fatalf("%s missing", key)
	return 0
}

const transferSize = 256 * mib

// BenchmarkTransfer256MiB compares, on one disk in one run, two plain file
// copies of the same bytes with an artifact upload (HTTP, SHA-256, classify,
// write, fsync, rename, commit) and download (HTTP, write, fsync):
//
//   - CopyFileRange is what cp does: io.Copy between two files, which Linux
//     serves with copy_file_range inside the kernel, then fsync;
//   - BufferedCopy is read and write through a 1 MiB buffer, then fsync (dd
//     bs=1M conv=fsync).
//
// MB/s is reported for each; compare them side by side.
func BenchmarkTransfer256MiB(b *testing.B) {
	dir := b.TempDir()
	src := sourceFile(b, dir, transferSize)
	b.Run("CopyFileRange", func(b *testing.B) {
		b.SetBytes(transferSize)
		for b.Loop() {
			in, _ := os.Open(src)
			out, err := os.Create(filepath.Join(dir, "copy.bin"))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(out, in); err != nil {
				b.Fatal(err)
			}
			out.Sync()
			out.Close()
			in.Close()
		}
	})
	b.Run("BufferedCopy", func(b *testing.B) {
		b.SetBytes(transferSize)
		for b.Loop() {
			in, _ := os.Open(src)
			writeSynced(b, filepath.Join(dir, "copy.bin"), in)
			in.Close()
		}
	})
	s := startServer(b, filepath.Join(dir, "home"))
	var last string
	b.Run("Upload", func(b *testing.B) {
		b.SetBytes(transferSize)
		for i := 0; b.Loop(); i++ {
			last = s.upload(b, src, fmt.Sprintf("up-%d-%d.bin", b.N, i))
		}
	})
	b.Run("Download", func(b *testing.B) {
		b.SetBytes(transferSize)
		for b.Loop() {
			if n := s.download(b, last, filepath.Join(dir, "down.bin")); n != transferSize {
				b.Fatalf("downloaded %d bytes", n)
			}
		}
	})
}

// BenchmarkUploadPeakRSS uploads 64 MiB and 1 GiB to fresh servers and
// reports each server's peak resident memory and its growth during the
// upload. Streaming means the two are about the same.
func BenchmarkUploadPeakRSS(b *testing.B) {
	dir := b.TempDir()
	for _, size := range []int64{64 * mib, 1024 * mib} {
		b.Run(fmt.Sprintf("%dMiB", size/mib), func(b *testing.B) {
			src := sourceFile(b, dir, size)
			s := startServer(b, filepath.Join(dir, fmt.Sprintf("home-%d", size)))
			base := vmRSS(b, s.cmd.Process.Pid)
			b.SetBytes(size)
			for i := 0; b.Loop(); i++ {
				s.upload(b, src, fmt.Sprintf("big-%d.bin", i))
			}
			peak := vmHWM(b, s.cmd.Process.Pid)
			b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
			b.ReportMetric(float64(peak-base)/1024, "RSS-growth-MiB")
		})
	}
}
