package e2e

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/desk-runtime/desk/store/postgres/pgtest"
)

// blobNodes starts two `desk serve` processes with separate DESK_HOMEs on
// one Postgres database and one S3 bucket (DESK_TEST_S3, a versitygw that
// .ci/run starts), under a fresh key prefix.
func blobNodes(t *testing.T) (a, b *Desk) {
	t.Helper()
	s3 := os.Getenv("DESK_TEST_S3")
	if s3 == "" {
		t.Skip("DESK_TEST_S3 is not set: no S3 server to test against (.ci/run starts versitygw and sets it)")
	}
	prefix := "e2e-" + strings.ToLower(rand.Text()[:10]) + "/"
	env := []string{"DESK_POSTGRES=" + pgtest.DSN(t), "DESK_BLOBS=" + s3 + "&prefix=" + prefix}
	dir := t.TempDir()
	a = startDesk(t, deskOpts{Home: filepath.Join(dir, "a"), Token: "blobs", Env: env})
	b = startDesk(t, deskOpts{Home: filepath.Join(dir, "b"), Token: "blobs", Env: env})
	return a, b
}

// upload posts body as artifact name and returns the status and id.
func upload(d *Desk, ses, name string, body []byte) (int, string, error) {
	req, _ := http.NewRequest("POST", d.URL+"/v1/sessions/"+ses+"/artifacts?name="+name, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var id string
	if i := bytes.Index(b, []byte(`"id":"`)); i >= 0 {
		id = string(b[i+6 : i+6+bytes.IndexByte(b[i+6:], '"')])
	}
	return resp.StatusCode, id, nil
}

func download(t *testing.T, d *Desk, ses, id string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", d.URL+"/v1/sessions/"+ses+"/artifacts/"+id+"/content", nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestArtifactsAcrossNodes: an artifact written on node A is read
// byte-exact on node B, which shares no directory with A; and node B
// restarting while A uploads (acceptance round d of issue 25) loses no
// acknowledged upload and leaves no row without its bytes.
func TestArtifactsAcrossNodes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("two-node test: skipped in -short mode")
	}
	a, b := blobNodes(t)
	var ws, ses struct{ ID string }
	a.call("POST", "/v1/workspaces", map[string]any{"name": "blobs"}, &ws)
	a.call("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"model": "script", "script": map[string]any{"steps": []map[string]any{{"text": "ok"}}}}, &ses)

	body := make([]byte, 3<<20+17)
	rand.Read(body)
	code, id, err := upload(a, ses.ID, "big.bin", body)
	if err != nil || code != 201 {
		t.Fatalf("upload on A = %d %v", code, err)
	}
	if code, got := download(t, b, ses.ID, id); code != 200 || !bytes.Equal(got, body) {
		t.Fatalf("B read %d: %d bytes, equal=%v; want the %d bytes A wrote", code, len(got), bytes.Equal(got, body), len(body))
	}

	// Round (d): uploads on A while B restarts.
	type done struct {
		name, id string
		body     []byte
	}
	var mu sync.Mutex
	var acked []done
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%d.bin", w, i)
				p := make([]byte, 64<<10+i)
				rand.Read(p)
				code, id, err := upload(a, ses.ID, name, p)
				if err == nil && code == 201 {
					mu.Lock()
					acked = append(acked, done{name, id, p})
					mu.Unlock()
				}
			}
		})
	}
	b = b.Restart(syscall.SIGKILL)
	b = b.Restart(syscall.SIGTERM)
	close(stop)
	wg.Wait()
	if len(acked) == 0 {
		t.Fatal("no upload was acknowledged while B restarted")
	}
	// Every acknowledged upload reads back byte-exact on both nodes.
	for _, d := range acked {
		for _, n := range []*Desk{a, b} {
			if code, got := download(t, n, ses.ID, d.id); code != 200 || !bytes.Equal(got, d.body) {
				t.Fatalf("%s (%s) on %s = %d, %d bytes; want its %d bytes", d.name, d.id, n.URL, code, len(got), len(d.body))
			}
		}
	}
	// No row without its bytes: every listed artifact reads on B.
	var list struct {
		Artifacts []struct {
			ID   string `json:"id"`
			Size int64  `json:"size"`
		} `json:"artifacts"`
	}
	b.call("GET", "/v1/sessions/"+ses.ID+"/artifacts", nil, &list)
	for _, x := range list.Artifacts {
		if code, got := download(t, b, ses.ID, x.ID); code != 200 || int64(len(got)) != x.Size {
			t.Errorf("artifact %s is listed but reads %d with %d of its %d bytes", x.ID, code, len(got), x.Size)
		}
	}
	t.Logf("%d uploads acknowledged while B restarted; %d rows, all readable on both nodes", len(acked), len(list.Artifacts))
}
