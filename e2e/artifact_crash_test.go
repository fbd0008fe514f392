package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
)

// crashIterations is how many kill -9 rounds TestArtifactCrash* run:
// DESK_CRASH_ITERATIONS, or 3 (go test ./... in CI); the full acceptance
// run is DESK_CRASH_ITERATIONS=20 (docs/operations.md).
func crashIterations(t *testing.T) int {
	t.Helper()
	if v := os.Getenv("DESK_CRASH_ITERATIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("DESK_CRASH_ITERATIONS=%q must be a positive integer", v)
		}
		return n
	}
	return 3
}

// TestArtifactCrashSQLite and TestArtifactCrashPostgres run the real desk
// binary, let 16 clients create artifacts concurrently (through the
// artifact API and the file API's upload into a session folder), kill the
// server with SIGKILL mid-way, restart it and check: every acknowledged
// (2xx) write is there byte-exact, no file in a session folder lacks its
// artifact row, no temporary file is left anywhere in DESK_HOME, and each
// write that was in flight at the kill succeeds when its client retries it.
func TestArtifactCrashSQLite(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	artifactCrash(t, func(t *testing.T) string { return "" })
}

func TestArtifactCrashPostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	artifactCrash(t, func(t *testing.T) string { return pgtest.DSN(t) })
}

const crashWriters = 16

func artifactCrash(t *testing.T, dsn func(t *testing.T) string) {
	var acked, retried int
	start := time.Now()
	for it := range crashIterations(t) {
		t.Run(fmt.Sprintf("iteration-%02d", it+1), func(t *testing.T) {
			a, r := artifactCrashOnce(t, dsn(t), uint64(it))
			acked += a
			retried += r
		})
		if t.Failed() {
			return
		}
	}
	t.Logf("%d iterations in %s: %d acknowledged writes all present byte-exact, %d in-flight writes retried successfully, no orphan or temporary file",
		crashIterations(t), time.Since(start).Round(time.Second), acked, retried)
}

// write is one artifact create a client attempted.
type write struct {
	name   string
	upload bool // through the file API instead of the artifact API
	body   []byte
}

func artifactCrashOnce(t *testing.T, pg string, seed uint64) (int, int) {
	d := startDesk(t, deskOpts{Token: "crash", Env: []string{"DESK_POSTGRES=" + pg}})
	home := d.Home
	c := &crashClient{url: d.URL}
	var ws, ses struct{ ID, Actor string }
	c.must(t, "POST", "/v1/workspaces", `{"name":"crash"}`, 201, &ws)
	c.must(t, "POST", "/v1/workspaces/"+ws.ID+"/sessions", `{}`, 201, &ses)

	rng := rand.New(rand.NewPCG(seed, 16))
	var mu sync.Mutex
	ok := map[string]write{} // acknowledged
	var inflight []write     // the attempt each writer was making at the kill
	var wg sync.WaitGroup
	for g := range crashWriters {
		wrng := rand.New(rand.NewPCG(seed, uint64(g)))
		wg.Go(func() {
			for i := 0; ; i++ {
				w := write{name: fmt.Sprintf("w%02d-%03d.bin", g, i), upload: i%2 == 1}
				w.body = make([]byte, 1<<10+wrng.IntN(256<<10))
				for j := range w.body {
					w.body[j] = byte(wrng.Uint32())
				}
				status, err := c.create(ws.ID, ses.ID, w)
				mu.Lock()
				if err == nil && status/100 == 2 {
					ok[w.name] = w
					mu.Unlock()
					continue
				}
				inflight = append(inflight, w)
				mu.Unlock()
				if err == nil {
					t.Errorf("create %s answered %d before the kill", w.name, status)
				}
				return // the server is gone
			}
		})
	}
	// Kill while writes are streaming and committing: after a random
	// number of acknowledged writes, so that each round crashes at another
	// point and none crashes before any write was acknowledged.
	acked := 1 + rng.IntN(3*crashWriters)
	testwait.Until(t, 2*time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ok) >= acked
	}, fmt.Sprintf("%d acknowledged writes", acked))
	d.Kill()
	wg.Wait()
	if len(ok) == 0 {
		t.Fatal("no write was acknowledged before the kill; the test proves nothing")
	}

	d = d.Again()
	c.url = d.URL
	defer d.Stop()
	rows := c.rows(t, ses.ID)
	for name, w := range ok {
		id, found := rows[name]
		if !found {
			t.Errorf("acknowledged write %s is lost", name)
			continue
		}
		if got := c.content(t, ses.ID, id); !bytes.Equal(got, w.body) {
			t.Errorf("acknowledged write %s has %d bytes (sha256 %x), want %d (%x)", name, len(got), sha256.Sum256(got), len(w.body), sha256.Sum256(w.body))
		}
	}
	crashDebris(t, home, ws.ID, ses.Actor, ses.ID, rows)
	// The clients whose writes were cut off retry them.
	for _, w := range inflight {
		status, err := c.create(ws.ID, ses.ID, w)
		if err != nil || status/100 != 2 {
			t.Errorf("retried create %s after the crash = %d %v", w.name, status, err)
		}
	}
	rows = c.rows(t, ses.ID)
	for _, w := range inflight {
		if got := c.content(t, ses.ID, rows[w.name]); !bytes.Equal(got, w.body) {
			t.Errorf("retried write %s has %d bytes, want %d", w.name, len(got), len(w.body))
		}
	}
	crashDebris(t, home, ws.ID, ses.Actor, ses.ID, rows)
	return len(ok), len(inflight)
}

// crashDebris fails for any temporary file under home and any file in the
// session's folder that has no artifact row.
func crashDebris(t *testing.T, home, ws, actor, ses string, rows map[string]string) {
	t.Helper()
	dir := filepath.Join(home, "workspaces", ws, "workspace", actor, "sessions", ses)
	err := filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasPrefix(d.Name(), ".desk-tmp-") {
			t.Errorf("temporary file left after the restart: %s", p)
		}
		if rel, err := filepath.Rel(dir, p); err == nil && !strings.HasPrefix(rel, "..") {
			if _, ok := rows[filepath.ToSlash(rel)]; !ok {
				t.Errorf("file without an artifact row after the restart: %s", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

type crashClient struct{ url string }

var crashHTTP = &http.Client{Timeout: 2 * time.Minute}

func (c *crashClient) do(method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequest(method, c.url+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer crash")
	return crashHTTP.Do(req)
}

func (c *crashClient) must(t *testing.T, method, path, body string, want int, out any) {
	t.Helper()
	resp, err := c.do(method, path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *crashClient) create(ws, ses string, w write) (int, error) {
	path := "/v1/sessions/" + ses + "/artifacts?name=" + w.name
	if w.upload {
		path = "/v1/workspaces/" + ws + "/upload?path=/sessions/" + ses + "/" + w.name
	}
	resp, err := c.do("POST", path, bytes.NewReader(w.body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// rows maps each artifact's path in the session folder to its id.
func (c *crashClient) rows(t *testing.T, ses string) map[string]string {
	t.Helper()
	var list struct{ Artifacts []struct{ ID, Path string } }
	c.must(t, "GET", "/v1/sessions/"+ses+"/artifacts", "", 200, &list)
	m := map[string]string{}
	for _, a := range list.Artifacts {
		m[strings.TrimPrefix(a.Path, "/artifacts/")] = a.ID
	}
	return m
}

func (c *crashClient) content(t *testing.T, ses, id string) []byte {
	t.Helper()
	resp, err := c.do("GET", "/v1/sessions/"+ses+"/artifacts/"+id+"/content", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("content of %s = %d %v", id, resp.StatusCode, err)
	}
	return b
}
