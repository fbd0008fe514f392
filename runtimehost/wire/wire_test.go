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
