package archtest

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/desk-runtime/desk"

// doors are the packages that serve desk to the outside: they import the
// root package (the contract) and their own helpers only.
var doors = []string{"httpapi", "web", "mcpserver"}

// neutral are the module's packages, outside the root and internal/, a
// door may import: they import nothing of the module but the root and
// hold no service state.
var neutral = map[string]string{
	"classify": "content classification of file heads (a pure function)",
	"client":   "the Go client of the HTTP API (mcpserver speaks to desk through it)",
}

// forbidden are import path prefixes no door may link, even indirectly,
// and why.
var forbidden = []struct{ prefix, why string }{
	{"github.com/openai/openai-go", "a model SDK"},
	{"github.com/anthropics/anthropic-sdk-go", "a model SDK"},
	{"mvdan.cc/sh", "the shell parser"},
	{module + "/store", "the store (doors reach it through services)"},
	{module + "/agent", "the agent (doors reach it through desk.AgentService)"},
	{module + "/conversation", "the conversation service (doors reach it through desk.ConversationService)"},
}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

var (
	listOnce sync.Once
	listed   map[string]*pkg
	listErr  error
)

// list runs `go list -deps -json` over the module once: every package the
// module builds (tests excluded), with its imports and dependencies.
func list(t *testing.T) map[string]*pkg {
	t.Helper()
	listOnce.Do(func() {
		cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", module+"/...")
		cmd.Dir = "../.."
		out, err := cmd.Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = errors.New(err.Error() + ": " + string(ee.Stderr))
			}
			listErr = err
			return
		}
		listed = map[string]*pkg{}
		dec := json.NewDecoder(strings.NewReader(string(out)))
		for {
			var p pkg
			if err := dec.Decode(&p); err == io.EOF {
				break
			} else if err != nil {
				listErr = err
				return
			}
			listed[p.ImportPath] = &p
		}
	})
	if listErr != nil {
		t.Fatalf("go list: %v", listErr)
	}
	return listed
}

func get(t *testing.T, rel string) *pkg {
	t.Helper()
	p := list(t)[module+"/"+rel]
	if p == nil {
		t.Fatalf("package %s is not in the module", rel)
	}
	return p
}

// TestDoorsLinkNoServiceInternals: the dependency closure of every door
// holds no model SDK, no shell parser, no store and no agent package.
func TestDoorsLinkNoServiceInternals(t *testing.T) {
	t.Parallel()
	for _, d := range doors {
		for _, dep := range get(t, d).Deps {
			for _, f := range forbidden {
				if dep == f.prefix || strings.HasPrefix(dep, f.prefix+"/") {
					t.Errorf("%s links %s (%s)", d, dep, f.why)
				}
			}
		}
	}
}

// TestDoorsImportTheContract: a door imports, of the module, the root,
// internal/ helpers, its own subpackages and the neutral helpers only;
// never another door or a service.
func TestDoorsImportTheContract(t *testing.T) {
	t.Parallel()
	for _, d := range doors {
		for _, imp := range get(t, d).Imports {
			rel, ok := strings.CutPrefix(imp, module+"/")
			switch {
			case !ok:
				continue // the root, or outside the module
			case strings.HasPrefix(rel, "internal/"), strings.HasPrefix(rel, d+"/"):
				continue
			case neutral[rel] != "":
				continue
			case slices.Contains(doors, rel):
				t.Errorf("%s imports the door %s; move what they share to the root or internal/", d, rel)
			default:
				t.Errorf("%s imports %s; doors import the root (desk) and their own helpers only", d, rel)
			}
		}
	}
}

// TestNeutralHelpersStayNeutral: the helpers doors may import import
// nothing of the module but the root and internal/ (client, the HTTP
// API's Go client, is held to this by TestClientImportsNoService).
func TestNeutralHelpersStayNeutral(t *testing.T) {
	t.Parallel()
	for rel := range neutral {
		if rel == "client" {
			continue
		}
		for _, imp := range get(t, rel).Imports {
			if r, ok := strings.CutPrefix(imp, module+"/"); ok && !strings.HasPrefix(r, "internal/") {
				t.Errorf("%s (allowed in doors: %s) imports %s", rel, neutral[rel], r)
			}
		}
	}
}

// TestSessionLinksNoProvider: the session service checks a model through
// desk.ModelCatalog and links no model provider.
func TestSessionLinksNoProvider(t *testing.T) {
	t.Parallel()
	for _, dep := range get(t, "session").Deps {
		if dep == module+"/agent" || strings.HasPrefix(dep, module+"/agent/") {
			t.Errorf("session links %s; check models through desk.ModelCatalog", dep)
		}
	}
}

// TestClientImportsNoService: the Go client speaks the API's wire types
// (the root's) and imports no service package.
func TestClientImportsNoService(t *testing.T) {
	t.Parallel()
	for _, imp := range get(t, "client").Imports {
		if r, ok := strings.CutPrefix(imp, module+"/"); ok && !strings.HasPrefix(r, "internal/") {
			t.Errorf("client imports %s; it speaks the root's types only", r)
		}
	}
}
