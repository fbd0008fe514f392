package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEtcCopy: the sandbox's /etc is desk's one-mount copy of the allowed
// entries: the same bytes as the host's (the linker cache, os-release),
// the links kept as links, the generated passwd over its placeholder, no
// shadow; resolv.conf only with the network; the copy sits in a
// directory only desk's user may enter.
func TestEtcCopy(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)
	dir := etcSnapshot(false)
	if dir == "" {
		t.Fatal("no copy of /etc on this host")
	}
	if fi, err := os.Stat(filepath.Dir(dir)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the copy's private directory: %v %v", fi.Mode(), err)
	}
	if args := strings.Join(etcArgs(false), " "); !strings.HasPrefix(args, "--ro-bind "+dir+" /etc --ro-bind-data") {
		t.Fatalf("etc args %s", args)
	}
	var checks []string
	for _, f := range []string{"ld.so.cache", "os-release", "ssl/certs/ca-certificates.crt"} {
		if b, err := os.ReadFile(filepath.Join("/etc", f)); err == nil {
			checks = append(checks, f)
			os.WriteFile(filepath.Join(h.scratch, strings.ReplaceAll(f, "/", "_")), b, 0o644)
		}
	}
	cmd := "cat /etc/passwd; test -e /etc/shadow && echo SHADOW; test -e /etc/resolv.conf && echo RESOLV; "
	for _, f := range checks {
		cmd += "cmp -s /etc/" + f + " /scratch/" + strings.ReplaceAll(f, "/", "_") + " || echo DIFFERS " + f + "; "
	}
	if l, err := os.Readlink("/etc/localtime"); err == nil {
		cmd += "test \"$(readlink /etc/localtime)\" = '" + l + "' || echo LINK; "
	}
	res, err := b.Run(context.Background(), Spec{Mounts: h.mounts, Cwd: "/scratch", Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "nobody:x:65534") ||
		strings.Contains(res.Stdout, "SHADOW") || strings.Contains(res.Stdout, "RESOLV") || strings.Contains(res.Stdout, "DIFFERS") || strings.Contains(res.Stdout, "LINK") {
		t.Fatalf("checked %v: exit %d\n%s%s", checks, res.ExitCode, res.Stdout, res.Stderr)
	}
	if len(checks) == 0 {
		t.Log("no host file to compare")
	}
	if net := etcSnapshot(true); net == "" || net == dir {
		t.Fatalf("the network copy %q (without: %q)", net, dir)
	} else if _, err := os.Stat(filepath.Join(net, "resolv.conf")); err != nil {
		t.Fatalf("no resolv.conf placeholder with the network: %v", err)
	}
}
