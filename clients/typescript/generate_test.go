// Package typescript_test keeps the TypeScript client's generated files in
// step with desk's HTTP API: openapi.json is the document desk serves at
// /v1/openapi.json, and src/schema.d.ts is what openapi-typescript makes of
// it. Both are committed (the package has no build step of desk's own);
// go generate ./clients/typescript rewrites them, and these tests fail when
// a committed file differs from what the Go types give.
package typescript_test

//go:generate go test -run ^TestGenerated -update .

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/desk-runtime/desk/httpapi"
)

var update = flag.Bool("update", false, "rewrite openapi.json and src/schema.d.ts")

// docVersion is the info.version of the committed document: the client
// follows the API, not a desk release.
const docVersion = "v1"

// TestGeneratedDocument: openapi.json is the route table's document.
func TestGeneratedDocument(t *testing.T) {
	t.Parallel()
	b, err := json.MarshalIndent((&httpapi.Server{Version: docVersion}).OpenAPI(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	same(t, "openapi.json", b)
}

// TestGeneratedSchema: src/schema.d.ts is openapi-typescript's output for
// the committed document, and the whole package type-checks with it.
func TestGeneratedSchema(t *testing.T) {
	t.Parallel()
	bin := tools(t)
	out := filepath.Join(t.TempDir(), "schema.d.ts")
	run(t, filepath.Join(bin, "openapi-typescript"), "openapi.json", "-o", out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	same(t, filepath.Join("src", "schema.d.ts"), b)
	// The hand-written layer and the generated types agree.
	run(t, filepath.Join(bin, "tsc"), "-p", ".", "--noEmit")
}

// tools is the package's node_modules/.bin, installed by .ci/run with npm
// ci; without it (or without node) the test skips, saying how to get it.
func tools(t *testing.T) string {
	t.Helper()
	bin, _ := filepath.Abs(filepath.Join("node_modules", ".bin"))
	if _, err := os.Stat(filepath.Join(bin, "openapi-typescript")); err != nil {
		if os.Getenv("DESK_REQUIRE_NPM") != "" {
			t.Fatalf("clients/typescript/node_modules is missing: run npm ci in clients/typescript")
		}
		t.Skip("clients/typescript/node_modules is missing: run npm ci in clients/typescript (.ci/run does)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH")
	}
	return bin
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(name), args, err, out.String())
	}
}

// same compares a committed file with what it should hold, or writes it
// under -update.
func same(t *testing.T, path string, want []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s is not committed: run go generate ./clients/typescript", path)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what desk's API gives: run go generate ./clients/typescript and commit the result", path)
	}
}
