package atomicfile

import (
	"errors"
	"hash"
	"io"
	"sync"
)

// WriteError wraps a failure to write the temporary file, as opposed to a
// failure to read the source, so a full disk is never blamed on a client
// whose upload was fine.
type WriteError struct{ Err error }

func (e *WriteError) Error() string { return "write: " + e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

const (
	fillChunk   = 1 << 20 // bytes per pipeline stage
	fillBuffers = 4       // chunks in flight: bounds memory at 4 MiB per fill
)

// Fill does not hint the kernel to start writeback early
// (sync_file_range): measured on ext4, the hints made 256 MiB uploads about
// 25% slower than leaving all writeback to the final fsync.

var chunkPool = sync.Pool{New: func() any { b := make([]byte, fillChunk); return &b }}

// Fill copies src into the temporary file and feeds every byte to h (when h
// is not nil). Reading the source, hashing and writing run in parallel on a
// small ring of buffers, so a fast network, a hash and a disk overlap instead
// of taking turns; memory stays bounded whatever the size. Read errors are
// returned as they are; write errors as *WriteError.
func (f *File) Fill(src io.Reader, h hash.Hash) (int64, error) {
	free := make(chan *[]byte, fillBuffers)
	full := make(chan []byte, fillBuffers)
	for range fillBuffers {
		free <- chunkPool.Get().(*[]byte)
	}
	defer func() {
		for range fillBuffers {
			chunkPool.Put(<-free)
		}
	}()

	var werr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for b := range full {
			if werr == nil {
				var wg sync.WaitGroup
				if h != nil {
					wg.Go(func() { h.Write(b) })
				}
				if _, err := f.File.Write(b); err != nil {
					werr = &WriteError{err}
				}
				wg.Wait()
			}
			bb := b[:cap(b)]
			free <- &bb
		}
	}()

	var n int64
	var rerr error
	for {
		bp := <-free
		k, err := io.ReadFull(src, *bp)
		if k > 0 {
			n += int64(k)
			full <- (*bp)[:k]
		} else {
			free <- bp
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			rerr = err
			break
		}
	}
	close(full)
	<-done
	if werr != nil {
		return n, werr
	}
	return n, rerr
}
