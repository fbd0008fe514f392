package sandbox

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompData is struct seccomp_data as the library's program reads it in
// x/net/bpf's VM: the VM loads words big-endian, so each 32-bit word the
// kernel would store in the machine's order is stored big-endian at the
// offset the program loads it from.
func seccompData(nr int, archID uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], uint32(nr))
	binary.BigEndian.PutUint32(b[4:], archID)
	lo, hi := 0, 4
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		lo, hi = 4, 0
	}
	for i, a := range args {
		off := 16 + 8*i
		binary.BigEndian.PutUint32(b[off+lo:], uint32(a))
		binary.BigEndian.PutUint32(b[off+hi:], uint32(a>>32))
	}
	return b
}

// TestSeccompPolicy runs the compiled filter in a BPF interpreter over the
// calls it must deny and the ones it must let through (the kernel's
// verdict inside a real sandbox is TestSeccompDeniesSetid's).
func TestSeccompPolicy(t *testing.T) {
	t.Parallel()
	info, err := arch.GetInfo(runtime.GOARCH)
	if err != nil {
		t.Skipf("no syscall table for %s: %v", runtime.GOARCH, err)
	}
	prog, err := seccompInstructions(info)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	const (
		allow  = unix.SECCOMP_RET_ALLOW
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
		kill   = unix.SECCOMP_RET_KILL_PROCESS
		cwd    = uint64(0xffffffffffffff9c) // AT_FDCWD, sign-extended
		path   = uint64(0x7ffd0000)
		creat  = unix.O_CREAT | unix.O_WRONLY
		tmpf   = unix.O_TMPFILE | unix.O_WRONLY
	)
	cases := []struct {
		name string
		args []uint64
		want uint32
	}{
		{"chmod", []uint64{path, 0o755}, allow},
		{"chmod", []uint64{path, 0o4755}, eperm},
		{"chmod", []uint64{path, 0o2755}, eperm},
		{"chmod", []uint64{path, 0o6000}, eperm},
		{"chmod", []uint64{path, 0o1777}, allow}, // sticky is harmless
		{"chmod", []uint64{path, 1<<32 | 0o644}, allow},
		{"chmod", []uint64{path, 1<<32 | 0o4644}, eperm},
		{"fchmod", []uint64{3, 0o644}, allow},
		{"fchmod", []uint64{3, 0o4644}, eperm},
		{"fchmodat", []uint64{cwd, path, 0o755}, allow},
		{"fchmodat", []uint64{cwd, path, 0o2755}, eperm},
		{"fchmodat2", []uint64{cwd, path, 0o755, 0}, allow},
		{"fchmodat2", []uint64{cwd, path, 0o4755, unix.AT_SYMLINK_NOFOLLOW}, eperm},
		{"open", []uint64{path, unix.O_RDONLY, 0o4755}, allow}, // no create: the mode is unused
		{"open", []uint64{path, creat, 0o644}, allow},
		{"open", []uint64{path, creat, 0o4755}, eperm},
		{"open", []uint64{path, tmpf, 0o2700}, eperm},
		{"openat", []uint64{cwd, path, unix.O_RDONLY, 0o6777}, allow},
		{"openat", []uint64{cwd, path, creat | unix.O_EXCL, 0o600}, allow},
		{"openat", []uint64{cwd, path, creat | unix.O_TRUNC, 0o4755}, eperm},
		{"openat", []uint64{cwd, path, tmpf, 0o4700}, eperm},
		{"openat", []uint64{cwd, path, tmpf, 0o700}, allow},
		{"creat", []uint64{path, 0o644}, allow},
		{"creat", []uint64{path, 0o4755}, eperm},
		{"mknod", []uint64{path, unix.S_IFREG | 0o644, 0}, allow},
		{"mknod", []uint64{path, unix.S_IFREG | 0o2755, 0}, eperm},
		{"mknodat", []uint64{cwd, path, unix.S_IFIFO | 0o644, 0}, allow},
		{"mknodat", []uint64{cwd, path, unix.S_IFREG | 0o4755, 0}, eperm},
		{"mkdir", []uint64{path, 0o2755}, allow}, // the kernel drops the bit
		{"mkdirat", []uint64{cwd, path, 0o755}, allow},
		{"openat2", []uint64{cwd, path, 0x7ffd1000, 24}, enosys},
		{"io_uring_setup", []uint64{8, 0x7ffd1000}, enosys},
		{"read", []uint64{0, 0x7ffd1000, 4096}, allow},
		{"execve", []uint64{path, 0, 0}, allow},
		{"fchown", []uint64{3, 1000, 1000}, allow},
	}
	for _, c := range cases {
		nr, ok := info.SyscallNames[c.name]
		if !ok {
			continue // arm64 has no chmod, open, creat, mknod, mkdir
		}
		got, err := vm.Run(seccompData(nr, uint32(info.ID), c.args...))
		if err != nil {
			t.Fatalf("%s%o: %v", c.name, c.args, err)
		}
		if uint32(got) != c.want {
			t.Errorf("%s %#o: action %#x, want %#x", c.name, c.args, got, c.want)
		}
	}
	// Another architecture's calls (i386 through int 0x80 on x86_64,
	// AArch32 on arm64) kill the process, whatever their number.
	for _, other := range []*arch.Info{arch.I386, arch.ARM, arch.X86_64, arch.AARCH64} {
		if other.ID == info.ID {
			continue
		}
		got, _ := vm.Run(seccompData(other.SyscallNames["chmod"], uint32(other.ID), path, 0o4755))
		if uint32(got) != kill {
			t.Errorf("%s chmod: action %#x, want kill %#x", other.Name, got, kill)
		}
	}
	// x32 calls on x86_64 answer ENOSYS.
	if info.ID == arch.X86_64.ID {
		got, _ := vm.Run(seccompData(0x40000000|arch.X32.SyscallNames["chmod"], uint32(info.ID), path, 0o4755))
		if uint32(got) != enosys {
			t.Errorf("x32 chmod: action %#x, want ENOSYS", got)
		}
	}
}

// setidProbe is run inside a sandbox in /workspace/setid (a command, or
// a runtime child): every way to make a setuid or setgid file it tries
// prints "<name> <result>"; then it prints "ready" and waits for a line on
// stdin, so the test can look at the host while it still runs. The
// syscall numbers come from the environment (NR_<name>, from the library's
// table for this architecture; a missing one is skipped).
const setidProbe = `cd /workspace/setid || exit 9
echo x > f
chmod u+s f 2>/dev/null; echo "sh-chmod-u+s $?"
chmod g+s f 2>/dev/null; echo "sh-chmod-g+s $?"
chmod 4755 f 2>/dev/null; echo "sh-chmod-4755 $?"
chmod 755 f; echo "sh-chmod-755 $?"
install -m 4755 /bin/true inst 2>/dev/null; echo "sh-install-4755 $?"
mkdir gdir; chmod g+s gdir 2>/dev/null; echo "sh-chmod-dir-g+s $?"
if [ -x /usr/bin/python3 ]; then /usr/bin/python3 - <<'EOF'
import ctypes, errno, os, stat
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, fn):
    try:
        fn()
        print(name, "ok", flush=True)
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, str(e.errno)), flush=True)
def sc(name, *args):
    nr = os.environ.get("NR_" + name)
    if nr is None:
        return
    def call():
        r = libc.syscall(ctypes.c_long(int(nr)), *[a if isinstance(a, bytes) else ctypes.c_long(a) for a in args])
        if r == -1:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        if r >= 0 and name in ("open", "openat", "creat"):
            os.close(r)
    attempt("sys-" + name, call)
AT_FDCWD = -100
attempt("py-chmod-4755", lambda: os.chmod("f", 0o4755))
attempt("py-chmod-2755", lambda: os.chmod("f", 0o2755))
attempt("py-chmod-644", lambda: os.chmod("f", 0o644))
attempt("py-open-creat-4755", lambda: os.close(os.open("py-made", os.O_CREAT | os.O_WRONLY, 0o4755)))
attempt("py-open-creat-2755", lambda: os.close(os.open("py-made-g", os.O_CREAT | os.O_WRONLY, 0o2755)))
attempt("py-open-creat-644", lambda: os.close(os.open("py-plain", os.O_CREAT | os.O_WRONLY, 0o644)))
attempt("py-tmpfile-4755", lambda: os.close(os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o4755)))
attempt("py-mknod-4755", lambda: os.mknod("py-node", stat.S_IFREG | 0o4755))
def mkdir_sgid():
    os.mkdir("py-dir", 0o2755)
    if os.stat("py-dir").st_mode & stat.S_ISGID:
        raise OSError(errno.EEXIST, "setgid directory made")
attempt("py-mkdir-2755", mkdir_sgid)
fd = os.open("f", os.O_RDONLY)
sc("chmod", b"f", 0o4755)
sc("fchmod", fd, 0o4755)
sc("fchmodat", AT_FDCWD, b"f", 0o2755)
sc("fchmodat2", AT_FDCWD, b"f", 0o4755, 0)
sc("open", b"sys-open", os.O_CREAT | os.O_WRONLY, 0o4755)
sc("openat", AT_FDCWD, b"sys-openat", os.O_CREAT | os.O_WRONLY, 0o6755)
sc("creat", b"sys-creat", 0o4755)
sc("mknod", b"sys-mknod", stat.S_IFREG | 0o4755, 0)
sc("mknodat", AT_FDCWD, b"sys-mknodat", stat.S_IFREG | 0o2755, 0)
how = ctypes.create_string_buffer(24)
sc("openat2", AT_FDCWD, b"sys-openat2", ctypes.addressof(how), 24)
params = ctypes.create_string_buffer(120)
sc("io_uring_setup", 8, ctypes.addressof(params))
if "NR_x32_chmod" in os.environ:
    sc("x32_chmod", b"f", 0o4755)
EOF
fi
echo ready
read line
echo done
`

// probeEnv is NR_<name> for the calls the probe makes directly.
func probeEnv(t *testing.T) map[string]string {
	info, err := arch.GetInfo(runtime.GOARCH)
	if err != nil {
		t.Skipf("no syscall table for %s", runtime.GOARCH)
	}
	env := map[string]string{}
	for _, n := range []string{"chmod", "fchmod", "fchmodat", "fchmodat2", "open", "openat", "creat", "mknod", "mknodat", "openat2", "io_uring_setup"} {
		if nr, ok := info.SyscallNames[n]; ok {
			env["NR_"+n] = strconv.Itoa(nr)
		}
	}
	if info.ID == arch.X86_64.ID {
		env["NR_x32_chmod"] = strconv.Itoa(0x40000000 | arch.X32.SyscallNames["chmod"])
	}
	return env
}

// checkProbe checks what the probe reported: every attempt to set the
// bits refused by the kernel, the harmless ones done.
func checkProbe(t *testing.T, results map[string]string) {
	t.Helper()
	want := map[string]string{
		"sh-chmod-u+s": "1", "sh-chmod-g+s": "1", "sh-chmod-4755": "1", "sh-chmod-755": "0",
		"sh-install-4755": "1", "sh-chmod-dir-g+s": "1",
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		for k, v := range map[string]string{
			"py-chmod-4755": "EPERM", "py-chmod-2755": "EPERM", "py-chmod-644": "ok",
			"py-open-creat-4755": "EPERM", "py-open-creat-2755": "EPERM", "py-open-creat-644": "ok",
			"py-tmpfile-4755": "EPERM", "py-mknod-4755": "EPERM", "py-mkdir-2755": "ok",
			"sys-fchmod": "EPERM", "sys-fchmodat": "EPERM", "sys-fchmodat2": "EPERM", "sys-openat": "EPERM",
			"sys-mknodat": "EPERM", "sys-openat2": "ENOSYS", "sys-io_uring_setup": "ENOSYS",
		} {
			want[k] = v
		}
		if runtime.GOARCH == "amd64" {
			for _, k := range []string{"sys-chmod", "sys-open", "sys-creat", "sys-mknod"} {
				want[k] = "EPERM"
			}
			want["sys-x32_chmod"] = "ENOSYS"
		}
	}
	for k, v := range want {
		if got, ok := results[k]; !ok {
			t.Errorf("%s: not reported", k)
		} else if got != v {
			t.Errorf("%s = %s, want %s", k, got, v)
		}
	}
}

// noSetidOnHost fails the test for every file or directory under dir that
// carries a setuid or setgid bit.
func noSetidOnHost(t *testing.T, dir, when string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		n++
		if fi, err := d.Info(); err == nil && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("%s: %s has mode %v on the host", when, p, fi.Mode())
		}
		return nil
	})
	return n
}

// readProbe reads the probe's report lines until "ready" and returns them.
func readProbe(t *testing.T, lines <-chan string) map[string]string {
	t.Helper()
	out := map[string]string{}
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the probe ended before it was ready: %v", out)
			}
			if l == "ready" {
				return out
			}
			if k, v, ok := strings.Cut(l, " "); ok {
				out[k] = v
			}
		case <-timeout:
			t.Fatalf("the probe did not get ready: %v", out)
		}
	}
}

// TestSeccompDeniesSetid: inside a command, every way to set the bits
// fails with EPERM (or ENOSYS for the calls denied outright), and no file
// on the host shows a bit while the command still runs or after it.
func TestSeccompDeniesSetid(t *testing.T) {
	t.Parallel()
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)
	dir := filepath.Join(h.workspace, "setid")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdinR.Close()
	defer stdinW.Close()
	pr, pw := io.Pipe()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	spec := h.spec(setidProbe)
	spec.Cwd, spec.Stdin, spec.Env = "/workspace", stdinR, probeEnv(t)
	type ran struct {
		res *Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := b.Run(context.Background(), spec, func(stream string, chunk []byte) {
			if stream == "stdout" {
				pw.Write(chunk)
			}
		})
		pw.Close()
		done <- ran{res, err}
	}()
	results := readProbe(t, lines)
	checkProbe(t, results)
	// The command is still running: what it made is on the host now.
	if n := noSetidOnHost(t, dir, "while the command runs"); n < 4 {
		t.Errorf("only %d entries under %s while the command runs", n, dir)
	}
	stdinW.WriteString("go\n")
	stdinW.Close()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.res.ExitCode != 0 {
		t.Fatalf("exit %d, stderr %q", r.res.ExitCode, r.res.Stderr)
	}
	noSetidOnHost(t, dir, "after the command")
}

// TestSeccompDeniesSetidRuntimeChild is the same inside a runtime child
// of the Spawner.
func TestSeccompDeniesSetidRuntimeChild(t *testing.T) {
	t.Parallel()
	s := spawner(t)
	h := newHome(t)
	dir := filepath.Join(h.workspace, "setid")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sp, _, _ := h.spawnSpec(t, setidProbe)
	for k, v := range probeEnv(t) {
		sp.Env[k] = v
	}
	proc, err := s.Spawn(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { proc.Kill(); proc.Wait(); proc.Close() }()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(proc.Stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	go io.Copy(io.Discard, proc.Stderr)
	checkProbe(t, readProbe(t, lines))
	if n := noSetidOnHost(t, dir, "while the child runs"); n < 4 {
		t.Errorf("only %d entries under %s while the child runs", n, dir)
	}
	io.WriteString(proc.Stdin, "go\n")
	for l := range lines {
		if l == "done" {
			break
		}
	}
	proc.Wait()
	noSetidOnHost(t, dir, "after the child")
}

// TestSeccompForeignArchitecture: a 64-bit program that makes the i386
// chmod call (int 0x80) to set the setuid bit is killed (SIGSYS), not let
// through because the number is another architecture's.
func TestSeccompForeignArchitecture(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("the i386 ABI is an x86_64 matter")
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)
	src := filepath.Join(t.TempDir(), "i386chmod.c")
	// A non-PIE binary, so the path's address fits int 0x80's 32-bit
	// registers.
	write(t, src, `static char path[] = "/workspace/target";
int main(void) {
	long r;
	__asm__ volatile ("int $0x80" : "=a"(r) : "a"(15), "b"(path), "c"(04755) : "memory");
	return r == 0 ? 0 : 3;
}
`)
	bin := filepath.Join(h.workspace, "i386chmod")
	if out, err := exec.Command(cc, "-O0", "-no-pie", "-o", bin, src).CombinedOutput(); err != nil {
		t.Skipf("cannot build the probe: %v: %s", err, out)
	}
	// The same call outside the sandbox, on a file of the test: where
	// the kernel serves no int 0x80 (ia32 emulation off) there is nothing
	// to test.
	outside := filepath.Join(t.TempDir(), "outside")
	outsrc := filepath.Join(t.TempDir(), "outside.c")
	write(t, outside, "x\n")
	write(t, outsrc, strings.Replace(readHost(t, src), "/workspace/target", outside, 1))
	outbin := filepath.Join(t.TempDir(), "outside")
	if out, err := exec.Command(cc, "-O0", "-no-pie", "-o", outbin, outsrc).CombinedOutput(); err != nil {
		t.Skipf("cannot build the probe: %v: %s", err, out)
	}
	if err := exec.Command(outbin).Run(); err != nil {
		t.Skipf("this kernel does not serve the i386 ABI through int 0x80 (%v)", err)
	}
	write(t, filepath.Join(h.workspace, "target"), "x\n")
	res := run(t, b, Spec{Mounts: h.mounts, Cwd: "/workspace", Command: "./i386chmod", Timeout: 30 * time.Second})
	if res.ExitCode != 128+int(unix.SIGSYS) {
		t.Errorf("exit %d, want %d (killed by SIGSYS); stderr %q", res.ExitCode, 128+int(unix.SIGSYS), res.Stderr)
	}
	noSetidOnHost(t, h.workspace, "after the i386 call")
}

// TestSeccompConcurrentLaunches: the filter is built once and handed to
// every launch on its own pipe; concurrent launches all get it.
func TestSeccompConcurrentLaunches(t *testing.T) {
	t.Parallel()
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			name := "/workspace/c" + strconv.Itoa(i)
			res, err := b.Run(context.Background(), h.spec("echo x > "+name+" && chmod 4755 "+name+"; echo $?"), nil)
			if err != nil {
				t.Error(err)
				return
			}
			if strings.TrimSpace(res.Stdout) != "1" {
				t.Errorf("%s: chmod 4755 answered %q, stderr %q", name, res.Stdout, res.Stderr)
			}
		})
	}
	wg.Wait()
}
