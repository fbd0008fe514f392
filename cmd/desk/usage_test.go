package main

import (
	"strings"
	"testing"
)

// TestMistypedCommandIsUsage: an unknown command exits 2 (usage), at the
// top level as under a noun, and names the command that was not found.
func TestMistypedCommandIsUsage(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, args := range [][]string{{"sesion", "list"}, {"bogus"}, {"workspace", "bogus"}} {
		r := c.fail(exitUsage, args...)
		if !strings.Contains(r.e.Error(), `unknown command "`+args[len(args)-1]+`"`) && !strings.Contains(r.e.Error(), `unknown command "`+args[0]+`"`) {
			t.Fatalf("desk %s: %v", strings.Join(args, " "), r.e)
		}
	}
	if r := c.run("sesion"); !strings.Contains(r.e.Error(), "session") {
		t.Fatalf("no suggestion for a near miss: %v", r.e)
	}
}
