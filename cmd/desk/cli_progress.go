package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// progressThreshold is the size above which transfers show a progress bar
// on a terminal without being asked.
const progressThreshold = 4 << 20

// progressFlags are the --progress and --no-progress flags of a transfer.
type progressFlags struct{ on, off bool }

func (p *progressFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&p.on, "progress", false, "always show a progress bar on stderr")
	cmd.Flags().BoolVar(&p.off, "no-progress", false, "never show a progress bar")
}

func (p *progressFlags) check() error {
	if p.on && p.off {
		return usagef("--progress and --no-progress contradict each other")
	}
	return nil
}

// show decides whether a transfer of size bytes (-1 unknown) gets a bar.
func (p *progressFlags) show(w io.Writer, size int64) bool {
	switch {
	case p.off:
		return false
	case p.on:
		return true
	}
	return size > progressThreshold && isTerminal(w)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// transferBar is a progress bar for one transfer, or nothing (nil) when
// none is shown; its methods are safe on nil.
type transferBar struct {
	bar *progressbar.ProgressBar
	w   io.Writer
}

// start returns the bar for a transfer of size bytes (-1 unknown) written
// to w (stderr), showing bytes, rate and time left.
func (p *progressFlags) start(w io.Writer, size int64, desc string) *transferBar {
	if !p.show(w, size) {
		return nil
	}
	b := progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		// No spinner goroutine for unknown sizes: the bar redraws as
		// bytes flow, and nothing outlives the transfer.
		progressbar.OptionSetSpinnerChangeInterval(0),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
	return &transferBar{bar: b, w: w}
}

// reader counts what flows through r on the bar.
func (t *transferBar) reader(r io.Reader) io.Reader {
	if t == nil {
		return r
	}
	return io.TeeReader(r, barWriter{t.bar})
}

// done completes the bar on success and leaves it where it stopped on
// failure, ending its line either way.
func (t *transferBar) done(err error) {
	if t == nil {
		return
	}
	switch {
	case err == nil:
		_ = t.bar.Finish()
	case !t.bar.IsFinished():
		_ = t.bar.Exit()
	}
}

// barWriter feeds a bar and never fails: a bar must not break a transfer
// (Add refuses counts beyond the announced size).
type barWriter struct{ bar *progressbar.ProgressBar }

func (b barWriter) Write(p []byte) (int, error) {
	_ = b.bar.Add(len(p))
	return len(p), nil
}
