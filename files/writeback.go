package files

import (
	"io"
	"os"

	"github.com/desk-runtime/desk/atomicfile"
)

// writebackStep is how much an upload receives between writeback hints,
// and writebackLag how far the hinted range stays behind what was read:
// atomicfile.Fill holds up to 4 MiB between reading and writing.
const (
	writebackStep = 16 << 20
	writebackLag  = 4 << 20
	// writebackMin is the smallest declared size worth hinting for; bodies
	// of unknown size are hinted too.
	writebackMin = 32 << 20
)

// writeback passes early-writeback hints to a background goroutine (see
// startWriteback); a nil *writeback does nothing.
type writeback struct {
	kick chan int64
	done chan struct{}
}

// progress says that n bytes were read. Hints are dropped while the
// goroutine is busy: the next one covers the range.
func (w *writeback) progress(n int64) {
	if w == nil || n <= writebackLag {
		return
	}
	select {
	case w.kick <- n - writebackLag:
	default:
	}
}

// stop waits for the goroutine; it must run before the file is closed.
func (w *writeback) stop() {
	if w == nil {
		return
	}
	close(w.kick)
	<-w.done
}

// progressReader reports its running total to a writeback every step.
type progressReader struct {
	r    io.Reader
	n    int64
	next int64
	wb   *writeback
}

func (p *progressReader) Read(b []byte) (int, error) {
	k, err := p.r.Read(b)
	p.n += int64(k)
	if p.n >= p.next {
		p.wb.progress(p.n)
		p.next = p.n + writebackStep
	}
	return k, err
}

// fileSink is where a body that moves itself (io.WriterTo) writes. Given a
// limited reader over a socket it lets os.File.ReadFrom splice the bytes
// from the socket into the page cache, a step at a time so writeback
// hints keep up; anything else is copied through one buffer.
type fileSink struct {
	f  *os.File
	wb *writeback
	n  int64
}

func (s *fileSink) Write(p []byte) (int, error) {
	k, err := s.f.Write(p)
	s.n += int64(k)
	s.wb.progress(s.n)
	if err != nil {
		return k, &atomicfile.WriteError{Err: err}
	}
	return k, nil
}

func (s *fileSink) ReadFrom(r io.Reader) (int64, error) {
	lr, ok := r.(*io.LimitedReader)
	if !ok {
		return io.CopyBuffer(struct{ io.Writer }{s}, r, make([]byte, 1<<20))
	}
	var total int64
	for lr.N > 0 {
		step := &io.LimitedReader{R: lr.R, N: min(writebackStep, lr.N)}
		k, err := s.f.ReadFrom(step)
		lr.N -= k
		total += k
		s.n += k
		s.wb.progress(s.n)
		if err != nil || k == 0 {
			return total, err // k == 0: the body ended early
		}
	}
	return total, nil
}
