package main

import (
	"strings"
	"testing"
)

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

// desk status shows the recorded --postgres without its password.
func TestRedactArgs(t *testing.T) {
	t.Parallel()
	got := redactArgs([]string{"--addr=127.0.0.1:7777", "--postgres=postgres://desk:s3cret@db:5432/desk?sslmode=disable", "--postgres=host=db password=x"})
	if strings.Contains(strings.Join(got, " "), "s3cret") || got[0] != "--addr=127.0.0.1:7777" || !strings.Contains(got[1], "desk:xxxxx@db:5432") {
		t.Fatalf("redacted %q", got)
	}
	if strings.Contains(got[2], "password=x") {
		t.Fatalf("a keyword DSN shown as is: %q", got[2])
	}
}
