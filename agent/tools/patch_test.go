package tools

import (
	"strings"
	"testing"
)

func TestParsePatchErrors(t *testing.T) {
	for patch, want := range map[string]string{
		"":                                      "first line",
		"*** Begin Patch\n*** Add File: a\n+x":  "last line",
		"*** Begin Patch\n*** End Patch":        "changes no file",
		"*** Begin Patch\nhello\n*** End Patch": `line 2: "hello" is not a file operation`,
		"*** Begin Patch\n*** Update File: a\n@@\n?x\n*** End Patch": `line 4: "?x": a chunk line starts with`,
		"*** Begin Patch\n*** Update File: a\n*** End Patch":         "update of a has no changes",
		"*** Begin Patch\n*** Add File: \n+x\n*** End Patch":         "names no file",
	} {
		if _, err := parsePatch(patch); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v; want %q", patch, err, want)
		}
	}
}

func TestApplyChunks(t *testing.T) {
	for _, c := range []struct {
		name, file, patch, want, err string
	}{
		{name: "first chunk without @@", file: "a\nb\nc\n", patch: " a\n-b\n+B\n c", want: "a\nB\nc\n"},
		{name: "the @@ line picks the second of two equal blocks",
			file:  "func A() {\n\treturn 0\n}\nfunc B() {\n\treturn 0\n}\n",
			patch: "@@ func B() {\n-\treturn 0\n+\treturn 1", want: "func A() {\n\treturn 0\n}\nfunc B() {\n\treturn 1\n}\n"},
		{name: "end of file anchors at the last match", file: "x\ny\nx\n", patch: "@@\n-x\n+z\n*** End of File", want: "x\ny\nz\n"},
		{name: "trailing white space is forgiven (context is written as the patch has it, as in Codex)", file: "a  \nb\n", patch: "@@\n a\n-b\n+c", want: "a\nc\n"},
		{name: "typographic quotes are forgiven", file: "say “hi”\n", patch: "@@\n-say \"hi\"\n+say 'hi'", want: "say 'hi'\n"},
		{name: "a pure addition lands after its context line", file: "a\nb\n", patch: "@@ a\n+a2", want: "a\na2\nb\n"},
		{name: "a missing final newline is added", file: "a\nb", patch: "@@\n-b\n+c", want: "a\nc\n"},
		{name: "two chunks in order", file: "1\n2\n3\n4\n5\n", patch: "@@\n-2\n+two\n@@\n-4\n+four", want: "1\ntwo\n3\nfour\n5\n"},
		{name: "chunks out of order do not match", file: "1\n2\n3\n", patch: "@@\n-3\n+x\n@@\n-1\n+y", err: "does not match"},
		{name: "a missing context line", file: "a\n", patch: "@@ nothere\n-a\n+b", err: `context line "nothere"`},
	} {
		ops, err := parsePatch("*** Begin Patch\n*** Update File: f\n" + c.patch + "\n*** End Patch")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := applyChunks(c.file, "f", ops[0].Chunks)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v; want %q", c.name, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

// TestApplyPatchGate: a patch is gated when any target is the user's
// files (or relative, landing in the working directory), not when it
// touches only /artifacts and /scratch.
func TestApplyPatchGate(t *testing.T) {
	for patch, want := range map[string]bool{
		"*** Begin Patch\n*** Add File: /artifacts/a\n+x\n*** Delete File: /scratch/b\n*** End Patch":      false,
		"*** Begin Patch\n*** Add File: /artifacts/a\n+x\n*** Delete File: /workspace/b\n*** End Patch":    true,
		"*** Begin Patch\n*** Update File: /scratch/a\n*** Move to: /home/me/a\n@@\n-x\n+y\n*** End Patch": true,
		"*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch":                                          true,
		"not a patch": false, // refused by Run before anything changes
	} {
		raw := []byte(`{"patch":` + quote(patch) + `}`)
		if got, _ := (applyPatch{}).Gate(nil, raw); got != want {
			t.Errorf("%q: gated %v; want %v", patch, got, want)
		}
	}
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}
