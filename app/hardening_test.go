package app_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
)

// TestImportRatioLimit: an archive that unpacks to more than 100 times its
// compressed size is refused (413) and leaves nothing behind, unless the
// operator raised the ratio.
func TestImportRatioLimit(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	exported := w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/export", nil, nil).Body
	es := tarEntries(t, exported)
	es = append(es, tarEntry{name: "checkout/zeros.bin", typ: '0', body: make([]byte, 48<<20)})
	bomb := makeArchive(t, es)
	if len(bomb)*100 > 48<<20 {
		t.Fatalf("the test archive compresses only to %d bytes", len(bomb))
	}
	e2 := apptest.Start(t, app.Config{})
	r := e2.Admin("POST", "/v1/workspaces/import", bomb)
	if r.Status != 413 || !strings.Contains(r.ErrorMessage(), "100 times its compressed size") {
		t.Fatalf("a decompression bomb = %d %s; want 413", r.Status, r.Body)
	}
	importLeftNothing(t, e2, w.ws.ID)

	e3 := apptest.Start(t, app.Config{ImportMaxRatio: 5000})
	if r := e3.Admin("POST", "/v1/workspaces/import", bomb); r.Status != 201 {
		t.Fatalf("with the ratio raised = %d %s", r.Status, r.Body)
	}
}

// rawRequest sends a request head over a fresh connection and then the
// body bytes through feed, and returns the response.
func rawRequest(t *testing.T, e *apptest.Env, head string, feed func(io.Writer)) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", e.Server.Listener.Addr().String())
	must(t, err)
	defer c.Close()
	_, err = io.WriteString(c, head)
	must(t, err)
	go feed(c)
	must(t, c.SetReadDeadline(time.Now().Add(60*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestBodyTrickleCutOff: a body trickled a byte a second is cut off with a
// clear error once a window passes without progress, while a big upload
// that keeps progressing for longer than the window succeeds.
func TestBodyTrickleCutOff(t *testing.T) {
	apptest.Parallel(t)
	w := newWorldOn(t, app.Config{BodyIdleTimeout: time.Second})
	stop := make(chan struct{})
	defer close(stop)
	start := time.Now()
	head := "POST /v1/workspaces HTTP/1.1\r\nHost: desk\r\nAuthorization: Bearer " + w.Token +
		"\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n"
	resp, body := rawRequest(t, w.Env, head, func(c io.Writer) {
		for range 60 {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
		}
	})
	took := time.Since(start)
	if resp.StatusCode != 408 || !strings.Contains(string(body), "stalled") {
		t.Fatalf("a trickled body = %d %s", resp.StatusCode, body)
	}
	if took > 30*time.Second {
		t.Fatalf("the trickle was cut off only after %s", took)
	}

	// 4 MiB in 256 KiB steps, 200 ms apart: about 3 s, three windows.
	pr, pw := io.Pipe()
	go func() {
		chunk := bytes.Repeat([]byte("x"), 256<<10)
		for range 16 {
			// A slow client on purpose: the body progresses, slowly.
			time.Sleep(200 * time.Millisecond)
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	r := w.Req("POST", fq(w.ws.ID, false, "upload", "path", "/big.bin"), w.Token, pr)
	if r.Status != 200 {
		t.Fatalf("a slow upload that progresses = %d %s", r.Status, r.Body)
	}
	var up desk.FileUpload
	r.Decode(t, &up)
	if up.Size != 4<<20 {
		t.Fatalf("uploaded %+v", up)
	}

	// A declared length this big takes the raw-socket path of uploads;
	// the window holds there as well: 40 MiB in 1 MiB steps, 100 ms apart.
	const size = 40 << 20
	req, err := http.NewRequest("POST", w.Server.URL+fq(w.ws.ID, false, "upload", "path", "/huge.bin"), &slowReader{left: size, step: 1 << 20, pause: 100 * time.Millisecond})
	must(t, err)
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+w.Token)
	resp, err = w.Server.Client().Do(req)
	must(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), fmt.Sprint(size)) {
		t.Fatalf("a big raw upload that progresses = %d %s", resp.StatusCode, body)
	}
}

// slowReader yields left zero bytes, step at a time, pausing between steps.
type slowReader struct {
	left, step int
	pause      time.Duration
	n          int // bytes of the current step given
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	if s.n == s.step {
		// The pause is the point: a client slower than the deadline.
		time.Sleep(s.pause)
		s.n = 0
	}
	k := min(len(p), s.left, s.step-s.n)
	clear(p[:k])
	s.left -= k
	s.n += k
	return k, nil
}

// TestAuthorizationSchemeCaseInsensitive: "bearer", "BEARER" and "Bearer"
// are one scheme (RFC 9110); other schemes are still refused.
func TestAuthorizationSchemeCaseInsensitive(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
		r := w.Req("GET", "/v1/workspaces/"+w.ws.ID, "", nil, "Authorization", scheme+" "+w.Token)
		if r.Status != 200 {
			t.Errorf("Authorization: %s <token> = %d %s", scheme, r.Status, r.Body)
		}
	}
	for _, h := range []string{"Basic " + w.Token, w.Token, "Bearer"} {
		if r := w.Req("GET", "/v1/workspaces/"+w.ws.ID, "", nil, "Authorization", h); r.Status != 401 {
			t.Errorf("Authorization: %q = %d; want 401", h, r.Status)
		}
	}
}

// TestJSONBodiesStrict: request bodies match field names exactly and
// refuse duplicate keys and invalid UTF-8 with a 400 naming the problem,
// on every route (here: create a workspace, submit, release a block), and
// a refused body changes nothing.
func TestJSONBodiesStrict(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	count := func() int {
		var l struct{ Workspaces []desk.Workspace }
		w.Must(200, "GET", "/v1/workspaces", nil, &l)
		return len(l.Workspaces)
	}
	before := count()
	for _, c := range []struct {
		method, path, body, want string
	}{
		{"POST", "/v1/workspaces", `{"Name":"x"}`, "unknown field"},
		{"POST", "/v1/workspaces", `{"NAME":"x"}`, "unknown field"},
		{"POST", "/v1/workspaces", `{"name":"a","name":"b"}`, "appears twice"},
		{"POST", "/v1/workspaces", "{\"name\":\"bad \xff utf-8\"}", "UTF-8"},
		{"POST", "/v1/workspaces", `{"name":"a"} {"name":"b"}`, "invalid JSON body"},
		{"POST", "/v1/sessions/" + w.a.ID + "/messages", `{"text":"hi","Text":"smuggled"}`, "unknown field"},
		{"POST", "/v1/sessions/" + w.a.ID + "/blocks/blk_01ABCDEFGHJKMNPQRSTVWXYZ00/release", `{"a":1,"a":2}`, "appears twice"},
	} {
		r := w.Admin(c.method, c.path, c.body)
		if r.Status != 400 || !strings.Contains(r.ErrorMessage(), c.want) {
			t.Errorf("%s %s %q = %d %s; want 400 naming %q", c.method, c.path, c.body, r.Status, r.Body, c.want)
		}
	}
	if n := count(); n != before {
		t.Fatalf("refused bodies created %d workspaces", n-before)
	}
	var q struct{ Items []desk.QueueItem }
	w.Must(200, "GET", "/v1/sessions/"+w.a.ID+"/queue", nil, &q)
	if len(q.Items) != 0 {
		t.Fatalf("a refused submit queued %+v", q.Items)
	}
	// Exact names still work.
	w.Must(201, "POST", "/v1/workspaces", map[string]string{"name": fmt.Sprint("ok")}, nil)
}

// TestNamesRefuseInvisibleAndAreNFC: artifact names and actor file paths
// refuse bidirectional overrides, zero-width and control characters with a
// 400, and are stored in normal form C, so the two spellings of "café" are
// one file through every door.
func TestNamesRefuseInvisibleAndAreNFC(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	for _, name := range []string{"invoice\u202Efdp.exe", "a\u200Bb.txt", "tab\tname.txt", "rtl\u2067x.md"} {
		r := w.Admin("POST", "/v1/sessions/"+w.a.ID+"/artifacts?name="+url.QueryEscape(name), []byte("x"))
		if r.Status != 400 || !strings.Contains(r.ErrorMessage(), "invisible") {
			t.Errorf("artifact %q = %d %s; want 400", name, r.Status, r.Body)
		}
		if r := w.upload(w.Token, "/dir/"+name, []byte("x")); r.Status != 400 {
			t.Errorf("file %q = %d %s; want 400", name, r.Status, r.Body)
		}
	}
	if arts := w.list(w.a.ID); len(arts) != 0 {
		t.Fatalf("refused names made artifacts: %+v", arts)
	}

	nfd, nfc := "cafe\u0301.txt", "caf\u00e9.txt"
	a := w.put(w.a.ID, url.QueryEscape(nfd), []byte("one"))
	if a.Name != nfc {
		t.Fatalf("artifact name %q; want the NFC spelling %q", a.Name, nfc)
	}
	if r := w.Admin("POST", "/v1/sessions/"+w.a.ID+"/artifacts?name="+url.QueryEscape(nfc), []byte("two")); r.Status != 409 {
		t.Fatalf("the other spelling of an artifact's name = %d %s; want 409 (one name)", r.Status, r.Body)
	}
	w.mustUpload("/notes/"+nfd, []byte("first"))
	w.mustUpload("/notes/"+nfc, []byte("second"))
	r := w.Req("GET", fq(w.ws.ID, false, "file", "path", "/notes/"+nfd), w.Token, nil)
	if r.Status != 200 || string(r.Body) != "second" {
		t.Fatalf("reading by the other spelling = %d %q; want one file holding the last upload", r.Status, r.Body)
	}
	_, l := w.listFiles(w.Token, "path", "/notes")
	if got := paths(l.Entries); len(got) != 1 || got[0] != "/notes/"+nfc {
		t.Fatalf("files in /notes = %v; want one, spelled NFC", got)
	}
}

// TestImportNormalizesNames: an archive's entries follow the same name
// rules: an override character is refused, and two spellings of one name
// are one file (so an archive carrying both is refused as a duplicate).
func TestImportNormalizesNames(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	exported := w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/export", nil, nil).Body
	e2 := apptest.Start(t, app.Config{})
	for name, extra := range map[string][]tarEntry{
		"override": {{name: "checkout/invoice\u202Efdp.exe", typ: '0', body: []byte("x")}},
		"both spellings": {
			{name: "checkout/cafe\u0301.txt", typ: '0', body: []byte("nfd")},
			{name: "checkout/caf\u00e9.txt", typ: '0', body: []byte("nfc")},
		},
	} {
		r := e2.Admin("POST", "/v1/workspaces/import", makeArchive(t, append(tarEntries(t, exported), extra...)))
		if r.Status != 400 {
			t.Errorf("%s: import = %d %s; want 400", name, r.Status, r.Body)
		}
		importLeftNothing(t, e2, w.ws.ID)
	}
	arch := makeArchive(t, append(tarEntries(t, exported), tarEntry{name: "checkout/cafe\u0301.txt", typ: '0', body: []byte("nfd")}))
	if r := e2.Admin("POST", "/v1/workspaces/import", arch); r.Status != 201 {
		t.Fatalf("import = %d %s", r.Status, r.Body)
	}
	if _, err := os.Stat(filepath.Join(e2.App.Home.Workspace(w.ws.ID), "checkout", "caf\u00e9.txt")); err != nil {
		t.Fatalf("the imported entry is not under its NFC name: %v", err)
	}
}
