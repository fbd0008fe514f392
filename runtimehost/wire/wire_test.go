package wire

import (
	"encoding/json"
	"testing"
)

// A command reads as a person would type it, whatever shape the runtime
// reports it in.
func TestCommandLine(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`"echo hi > x"`:                       "echo hi > x",
		`"/bin/sh -lc 'echo a > b && cat b'"`: "echo a > b && cat b",
		`"bash -c 'echo '\\''q'\\'''"`:        "echo 'q'",
		`["bash","-lc","echo hi > x"]`:        "echo hi > x",
		`["ls","-la","my file"]`:              "ls -la 'my file'",
		`{"command":"x"}`:                     "",
	} {
		if got := CommandLine(json.RawMessage(in)); got != want {
			t.Errorf("CommandLine(%s) = %q, want %q", in, got, want)
		}
	}
}

// Codex's "model metadata not found" warning, glued into the reply by
// codex-acp, comes out as a notice and the reply keeps only its own text;
// a sink that takes no notices gets nothing from Notify.
func TestSplitNotices(t *testing.T) {
	const warn = "Model metadata for `gpt-x` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."
	rest, ns := SplitNotices(warn + "\n\nWrote /workspace/x.")
	if rest != "Wrote /workspace/x." || len(ns) != 1 || ns[0] != warn {
		t.Fatalf("rest %q notices %q", rest, ns)
	}
	if rest, ns := SplitNotices("Model metadata is fine."); rest != "Model metadata is fine." || ns != nil {
		t.Fatalf("an ordinary reply changed: %q %q", rest, ns)
	}
	if Notify(nil, "warning", warn) {
		t.Fatal("Notify reported a notice to a sink that takes none")
	}
}
