package main

import "testing"

// TestManagedEnvValue: a marker with a value that does not mark anything
// is not a refusal reason (CODEX_CI=0); the same marker with its value is.
func TestManagedEnvValue(t *testing.T) {
	t.Parallel()
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "CODEX_CI" {
				return v
			}
			return ""
		}
	}
	if _, ok := managedEnv(env("0")); ok {
		t.Fatal("CODEX_CI=0 treated as managed")
	}
	if why, ok := managedEnv(env("1")); !ok || why != "CODEX_CI is set (Codex CI)" {
		t.Fatalf("CODEX_CI=1: %q, %v", why, ok)
	}
}
