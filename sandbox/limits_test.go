//go:build linux

package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The bound tests run each limit small, so that reaching it is quick and
// cheap on a loaded machine, and check that the command stopped there and
// that the result names the limit.

func limitSpec(h *home, cmd string, l Limits) Spec {
	s := h.spec(cmd)
	s.Limits = l
	s.Timeout = 90 * time.Second
	return s
}

func wantDenial(t *testing.T, res *Result, limit string, reasonHas string) {
	t.Helper()
	if res.Denial == nil {
		t.Fatalf("no denial; exit %d, timed out %v, stderr %.300q", res.ExitCode, res.TimedOut, res.Stderr)
	}
	if res.Denial.Limit != limit || !strings.Contains(res.Denial.Reason, reasonHas) {
		t.Fatalf("denial %+v, want limit %q with %q in its reason", res.Denial, limit, reasonHas)
	}
	if res.TimedOut {
		t.Fatalf("the command ran into its timeout instead of the limit")
	}
}

func TestBoundForkBomb(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)
	res := run(t, b, limitSpec(h, `f() { f | f & }; f; sleep 60`, Limits{Processes: 64}))
	wantDenial(t, res, LimitProcesses, "process limit (64 processes)")
	if res.Duration > 60*time.Second {
		t.Errorf("the fork bomb ran %v", res.Duration)
	}
}

func TestBoundTmpSize(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)
	res := run(t, b, limitSpec(h, `dd if=/dev/zero of=/tmp/big bs=1M count=1024`, Limits{TmpBytes: 8 << 20}))
	wantDenial(t, res, LimitTmp, "/tmp size limit (8 MiB)")
}

func TestBoundOutputFlood(t *testing.T) {
	for name, r := range map[string]Runner{"bubblewrap": sandboxed(t, DefaultGrace), "direct": &direct{grace: DefaultGrace}} {
		t.Run(name, func(t *testing.T) {
			h := newHome(t)
			var streamed atomic.Int64
			res, err := r.Run(context.Background(), limitSpec(h, `yes`, Limits{OutputBytes: 1 << 20}), func(_ string, b []byte) {
				streamed.Add(int64(len(b)))
			})
			if err != nil {
				t.Fatal(err)
			}
			wantDenial(t, res, LimitOutput, "output limit (1 MiB)")
			if streamed.Load() != 1<<20 {
				t.Errorf("handed on %d bytes, want exactly the 1 MiB limit", streamed.Load())
			}
			if res.StdoutBytes < 1<<20 {
				t.Errorf("counted %d bytes, want at least the limit", res.StdoutBytes)
			}
		})
	}
}

func TestBoundMemory(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)
	// 1 GiB touched page by page, against a 64 MiB limit.
	res := run(t, b, limitSpec(h, `python3 -c 'b = bytearray(1 << 30); [b.__setitem__(i, 1) for i in range(0, len(b), 4096)]'`,
		Limits{MemoryBytes: 64 << 20}))
	wantDenial(t, res, LimitMemory, "memory limit (64 MiB)")
}

func TestBoundCPU(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)
	res := run(t, b, limitSpec(h, `while :; do :; done`, Limits{CPUSeconds: 1}))
	wantDenial(t, res, LimitCPU, "CPU time limit (1 s)")
}

func TestWriteBoundaryDenials(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)
	for cmd, path := range map[string]string{
		`touch /etc/x`:                           "/etc/x",
		`echo hi > /artifacts/immutable/new.txt`: "/artifacts/immutable/new.txt",
		`mkdir /context/grp1/d`:                  "/context/grp1/d",
	} {
		res := run(t, b, h.spec(cmd))
		if res.Denial == nil || res.Denial.Path != path || !strings.Contains(res.Denial.Reason, "outside the sandbox's write boundary") {
			t.Errorf("%s: denial %+v (exit %d, stderr %q), want path %s", cmd, res.Denial, res.ExitCode, res.Stderr, path)
		}
	}
	// A command failing on its own inside the boundary is no denial.
	for _, cmd := range []string{`exit 3`, `cat /workspace/missing`, `echo x > /workspace/README; false`} {
		if res := run(t, b, h.spec(cmd)); res.Denial != nil || res.ExitCode == 0 {
			t.Errorf("%s: exit %d, denial %+v, want a plain failure", cmd, res.ExitCode, res.Denial)
		}
	}
}

func TestNetworkOffDenial(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)
	res := run(t, b, h.spec(`python3 -c 'import socket; socket.create_connection(("10.1.2.3", 80), timeout=5)'`))
	if res.Denial == nil || res.Denial.Limit != LimitNetwork {
		t.Errorf("denial %+v, stderr %q", res.Denial, res.Stderr)
	}
}

func TestUnprivilegedAndNoSetid(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	if !b.userns {
		t.Skip("this bwrap runs without a user namespace")
	}
	h := newHome(t)
	// A setuid file already in the mount (left before the seccomp filter
	// existed) is cleared by the post-run strip, the second line.
	planted := filepath.Join(h.workspace, "planted")
	write(t, planted, "x\n")
	if err := os.Chmod(planted, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	res := run(t, b, h.spec(`id -u; echo x > /workspace/made; cp /bin/true /workspace/suid; chmod 6755 /workspace/suid; echo $?`))
	if strings.Fields(res.Stdout)[0] != "1000" || res.ExitCode != 0 {
		t.Fatalf("uid %q exit %d stderr %q", res.Stdout, res.ExitCode, res.Stderr)
	}
	if strings.Fields(res.Stdout)[1] != "1" {
		t.Errorf("chmod 6755 answered %q, stderr %q; want it refused", res.Stdout, res.Stderr)
	}
	for _, name := range []string{"suid", "planted"} {
		fi, err := os.Stat(filepath.Join(h.workspace, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s: mode %v keeps setuid/setgid", name, fi.Mode())
		}
	}
	// desk can rewrite what the command wrote.
	if err := os.WriteFile(filepath.Join(h.workspace, "made"), []byte("y"), 0o644); err != nil {
		t.Error(err)
	}
}
