package acpagent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// The gate passes well-formed messages on unchanged and answers the rest
// with the JSON-RPC error of their kind, going on after each.
func TestGate(t *testing.T) {
	huge := `{"jsonrpc":"2.0","id":"big","method":"session/prompt","params":{"text":"` + strings.Repeat("x", 300<<10) + `"}}`
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{oops`,
		`[1]`,
		`"just a string"`,
		`{"jsonrpc":"2.0","id":[1],"method":"x"}`,
		`{"id":2,"method":"initialize"}`,
		`{"jsonrpc":"2.0","id":3}`,
		`{"jsonrpc":"2.0","id":4,"method":7}`,
		`{"jsonrpc":"2.0","id":5,"method":"session/new","params":12}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":12}`,
		huge,
		``,
		`{"jsonrpc":"2.0","id":6,"result":{}}`,
		`{"jsonrpc":"2.0","id":7,"method":"session/new","params":{"cwd":"/"}}`,
	}, "\n")
	var next, out bytes.Buffer
	if err := gate(strings.NewReader(in), &next, &out, 256<<10, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	passed := strings.Split(strings.TrimSpace(next.String()), "\n")
	want := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","id":6,"result":{}}`,
		`{"jsonrpc":"2.0","id":7,"method":"session/new","params":{"cwd":"/"}}`,
	}
	if strings.Join(passed, "\n") != strings.Join(want, "\n") {
		t.Fatalf("passed on:\n%s", next.String())
	}
	var got []string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m struct {
			ID    json.RawMessage    `json:"id"`
			Error struct{ Code int } `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("answer %q: %v", sc.Text(), err)
		}
		got = append(got, string(m.ID)+" "+itoa(m.Error.Code))
	}
	wantErr := []string{"null -32700", "null -32600", "null -32600", "null -32600", "2 -32600", "3 -32600", "4 -32600", "5 -32602", `"big" -32600`}
	if strings.Join(got, "|") != strings.Join(wantErr, "|") {
		t.Fatalf("answers:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantErr, "\n"))
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// A closed next ends the gate with its error.
func TestGateClosedNext(t *testing.T) {
	pr, pw := io.Pipe()
	pr.Close()
	err := gate(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`+"\n"), pw, io.Discard, 1<<20, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("gate went on writing to a closed pipe")
	}
}
