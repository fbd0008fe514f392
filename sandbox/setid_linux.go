package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// maxSweepPaths bounds SetidSweep.Paths.
const maxSweepPaths = 10

// maxSweepDepth bounds how deep a sweep descends: each level of a walk
// holds one open directory. Deeper directories are counted in Skipped.
const maxSweepDepth = 4096

// sweepQueue bounds the directories opened and waiting for a worker;
// past it a worker walks the directory it found itself.
const sweepQueue = 256

// SweepSetid clears the setuid and setgid bits of every regular file below
// the roots (desk's home at startup: a file a crashed run left never had
// its post-run strip). The seccomp filter keeps a sandbox from making such
// a file at all; this is the line behind it, for files made before it
// existed or by a sandbox without it.
//
// The walk never follows a symbolic link below a root (the root itself may
// be one: DESK_HOME may be a link the operator made): every directory is
// opened relative to its parent's descriptor with O_NOFOLLOW, every file is
// examined with fstatat(AT_SYMLINK_NOFOLLOW), and a file's mode is changed
// through an O_PATH descriptor of that very file, never by path. A
// directory desk owns but cannot read (a command's chmod 0 or 0111) is
// opened by granting desk read and search on it for the walk, then given
// its mode back. Directories keep their setgid bit (it only sets the group
// of new files, and the filter does not let a sandbox set it). A root that
// does not exist is no error. Directories are walked by a few goroutines
// at once: the cost is one fstatat per file, and system calls run in
// parallel.
func SweepSetid(roots ...string) (SetidSweep, error) {
	start := time.Now()
	w := &setidWalker{}
	w.run(roots, true)
	res := w.result()
	res.Elapsed = time.Since(start)
	return res, w.err
}

// stripSetid is the post-run strip: SweepSetid over a finished command's
// (or runtime child's) writable mounts, whose host directories are never
// links (the launch opened them with O_NOFOLLOW).
func stripSetid(ms []Mount) error {
	var roots []string
	for _, m := range ms {
		if m.Writable {
			roots = append(roots, m.Host)
		}
	}
	w := &setidWalker{}
	w.run(roots, false)
	return w.err
}

type setidWalker struct {
	entries, cleared, skipped atomic.Int64

	mu    sync.Mutex
	paths []string
	err   error // the first file whose bits could not be cleared

	queue   chan setidTask
	pending sync.WaitGroup // tasks sent and not yet walked
}

// setidTask is an open directory waiting for a worker.
type setidTask struct {
	fd    int
	path  string
	depth int
}

func (w *setidWalker) result() SetidSweep {
	w.mu.Lock()
	defer w.mu.Unlock()
	return SetidSweep{Entries: w.entries.Load(), Cleared: w.cleared.Load(), Paths: w.paths, Skipped: w.skipped.Load()}
}

// run walks the roots, on this goroutine and a few workers, and returns
// when every directory was walked.
func (w *setidWalker) run(roots []string, follow bool) {
	w.queue = make(chan setidTask, sweepQueue)
	var workers sync.WaitGroup
	for range min(8, max(2, 2*runtime.GOMAXPROCS(0))) {
		workers.Go(func() {
			for t := range w.queue {
				w.dir(t.fd, t.path, t.depth)
				w.pending.Done()
			}
		})
	}
	for _, root := range roots {
		w.root(root, follow)
	}
	w.pending.Wait()
	close(w.queue)
	workers.Wait()
}

func (w *setidWalker) root(root string, follow bool) {
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Open(root, flags, 0)
	if err != nil {
		if !errors.Is(err, unix.ENOENT) {
			w.skipped.Add(1)
		}
		return
	}
	w.dir(fd, root, 0)
}

// dir walks the open directory fd (and closes it); name is its path, for
// reports only.
func (w *setidWalker) dir(fd int, name string, depth int) {
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	for {
		ents, err := f.ReadDir(512)
		for _, e := range ents {
			w.entry(fd, name, e, depth)
		}
		if err != nil {
			if err != io.EOF {
				w.skipped.Add(1)
			}
			return
		}
	}
}

func (w *setidWalker) entry(dirfd int, dirName string, e fs.DirEntry, depth int) {
	w.entries.Add(1)
	name := e.Name()
	switch t := e.Type(); {
	case t.IsDir():
		if depth+1 >= maxSweepDepth {
			w.skipped.Add(1)
			return
		}
		w.subdir(dirfd, dirName+"/"+name, name, depth+1)
	case t.IsRegular():
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return // gone since the listing
		}
		if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&setidBits != 0 {
			w.clear(dirfd, dirName+"/"+name, name, &st)
		}
	}
	// Links are never followed; devices, pipes and sockets run nothing.
}

// subdir opens and walks directory name of dirfd. A directory desk owns
// but may not read or search is opened with u+rx added for the walk and
// its mode restored after.
func (w *setidWalker) subdir(dirfd int, path, name string, depth int) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if err == nil {
		// To a worker, or walked here when they all have enough to do.
		w.pending.Add(1)
		select {
		case w.queue <- setidTask{fd, path, depth}:
		default:
			w.pending.Done()
			w.dir(fd, path, depth)
		}
		return
	}
	if !errors.Is(err, unix.EACCES) {
		if !errors.Is(err, unix.ENOENT) {
			w.skipped.Add(1)
		}
		return
	}
	pfd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		w.skipped.Add(1)
		return
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil || int(st.Uid) != os.Geteuid() {
		w.skipped.Add(1)
		return
	}
	mode := st.Mode & 0o7777
	if err := chmodFD(pfd, mode|unix.S_IRUSR|unix.S_IXUSR); err != nil {
		w.skipped.Add(1)
		return
	}
	defer chmodFD(pfd, mode)
	// Reopen through the O_PATH descriptor: the same directory, whatever
	// happened to the name since. Walked here, not by a worker: its mode
	// is given back once the walk is done.
	fd, err = unix.Openat(pfd, ".", flags, 0)
	if err != nil {
		w.skipped.Add(1)
		return
	}
	w.dir(fd, path, depth)
}

// clear clears the bits of file name in dirfd, which fstatat found to be
// st, through a descriptor of the file itself after checking that it is
// still that regular file.
func (w *setidWalker) clear(dirfd int, path, name string, st *unix.Stat_t) {
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return // gone, or replaced by something that is no file
	}
	defer unix.Close(fd)
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil || now.Mode&unix.S_IFMT != unix.S_IFREG || now.Dev != st.Dev || now.Ino != st.Ino {
		return
	}
	if now.Mode&setidBits == 0 {
		return
	}
	err = chmodFD(fd, now.Mode&0o7777&^setidBits)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if w.err == nil {
			w.err = fmt.Errorf("sandbox: clear the setuid/setgid bits of %s: %w", path, err)
		}
		return
	}
	w.cleared.Add(1)
	if len(w.paths) < maxSweepPaths {
		w.paths = append(w.paths, path)
	}
}

// chmodFD changes the mode of the file an O_PATH descriptor refers to:
// fchmodat2(fd, "", AT_EMPTY_PATH) where the kernel has it (6.6), else
// chmod through /proc/self/fd, which refers to that same inode (fchmod
// refuses O_PATH descriptors).
func chmodFD(fd int, mode uint32) error {
	err := unix.Fchmodat(fd, "", mode, unix.AT_EMPTY_PATH)
	if err == nil || !(errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL)) {
		return err
	}
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode)
}
