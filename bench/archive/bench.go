// Command archive measures durable appends to desk's archive: how many
// records per second are acknowledged durable at 1, 8 and 64 concurrent
// writers, beside a naive writer that opens the file with O_APPEND, writes
// one record, fsyncs and closes it for every record, on the same disk; and
// the p50 and p99 time to acknowledge one append. All writers of a case
// append to one conversation, so they share one file: the case group commit
// is for.
//
//	go run ./bench/archive                 # 2s per case, in a temp dir
//	go run ./bench/archive -dir /data/x -duration 5s -writers 1,8,64,256
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/desk-runtime/desk/archive"
	"github.com/desk-runtime/desk/layout"
)

func main() {
	var cfg config
	var writers string
	flag.StringVar(&cfg.Dir, "dir", "", "directory on the disk to measure (default: a new temp dir, removed afterwards)")
	flag.DurationVar(&cfg.Duration, "duration", 2*time.Second, "how long each case runs")
	flag.StringVar(&writers, "writers", "1,8,64", "comma-separated numbers of concurrent writers")
	flag.IntVar(&cfg.TextBytes, "text", 200, "bytes of message text per record")
	flag.Parse()
	for _, w := range strings.Split(writers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bad -writers %q\n", writers)
			os.Exit(2)
		}
		cfg.Writers = append(cfg.Writers, n)
	}
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "desk-archive-bench-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer os.RemoveAll(d)
		cfg.Dir = d
	}
	if _, err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type config struct {
	Dir       string
	Duration  time.Duration
	Writers   []int
	TextBytes int
}

// result is one case: one number of writers, both writers.
type result struct {
	Writers                int
	Naive, Desk            float64 // acknowledged appends per second
	NaiveP50, NaiveP99     time.Duration
	DeskP50, DeskP99       time.Duration
	DeskRecords, DeskSyncs uint64
}

func run(ctx context.Context, cfg config, out io.Writer) ([]result, error) {
	fmt.Fprintf(out, "disk: %s\nduration per case: %v, record text: %d bytes, all writers append to one conversation file\n\n",
		cfg.Dir, cfg.Duration, cfg.TextBytes)
	fmt.Fprintf(out, "%7s | %14s %10s %10s | %14s %10s %10s %9s | %7s\n",
		"writers", "naive/s", "naive p50", "naive p99", "desk/s", "desk p50", "desk p99", "rec/fsync", "ratio")
	text := strings.Repeat("x", cfg.TextBytes)
	var results []result
	for i, n := range cfg.Writers {
		r := result{Writers: n}
		var err error
		if r.Naive, r.NaiveP50, r.NaiveP99, err = naive(ctx, filepath.Join(cfg.Dir, fmt.Sprintf("naive-%d", i)), n, cfg.Duration, text); err != nil {
			return nil, err
		}
		if err := deskCase(ctx, filepath.Join(cfg.Dir, fmt.Sprintf("desk-%d", i)), n, cfg.Duration, text, &r); err != nil {
			return nil, err
		}
		results = append(results, r)
		fmt.Fprintf(out, "%7d | %14.0f %10v %10v | %14.0f %10v %10v %9.1f | %6.1fx\n",
			n, r.Naive, round(r.NaiveP50), round(r.NaiveP99), r.Desk, round(r.DeskP50), round(r.DeskP99),
			float64(r.DeskRecords)/float64(max(r.DeskSyncs, 1)), r.Desk/r.Naive)
	}
	if i := slices.IndexFunc(results, func(r result) bool { return r.Writers == 64 }); i >= 0 {
		r := results[i]
		verdict := "meets"
		if r.Desk/r.Naive < 20 {
			verdict = "MISSES"
		}
		fmt.Fprintf(out, "\nat 64 writers desk acknowledges %.1fx the naive rate (%s the 20x target); p99 ack %v\n",
			r.Desk/r.Naive, verdict, round(r.DeskP99))
	}
	return results, nil
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	case d >= time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d
}

// line is what the naive writer appends: the same bytes desk writes for a
// record of the same size, give or take the id.
func line(text string, g, i int) []byte {
	return []byte(fmt.Sprintf(`{"schema_version":1,"at":"%s","direction":"inbound","event_type":"message_inbound","channel":"bench","conversation_id":"c1","message_id":"m%d-%d","text":"%s"}`+"\n",
		time.Now().UTC().Format(time.RFC3339Nano), g, i, text))
}

// naive appends with open(O_APPEND), write, fsync, close per record.
func naive(ctx context.Context, dir string, writers int, d time.Duration, text string) (float64, time.Duration, time.Duration, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, 0, err
	}
	name := filepath.Join(dir, "bench--c1.ndjson")
	return hammer(ctx, writers, d, func(g, i int) error {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.Write(line(text, g, i)); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
}

func deskCase(ctx context.Context, dir string, writers int, d time.Duration, text string, r *result) error {
	home := layout.Home{Root: dir}
	if err := os.MkdirAll(home.Workspace("ws_bench"), 0o755); err != nil {
		return err
	}
	a, err := archive.Open(home, archive.Options{ViewsInterval: -1})
	if err != nil {
		return err
	}
	defer a.Close(context.Background())
	r.Desk, r.DeskP50, r.DeskP99, err = hammer(ctx, writers, d, func(g, i int) error {
		return a.Append(ctx, "ws_bench", &archive.MessageInbound{
			Envelope:  archive.Envelope{Channel: "bench", ConversationID: "c1"},
			MessageID: fmt.Sprintf("m%d-%d", g, i), Text: text,
		})
	})
	st := a.Stats()
	r.DeskRecords, r.DeskSyncs = st.Appended, st.Syncs
	return err
}

// hammer runs writers goroutines calling appendOne in a loop for d and
// returns acknowledged appends per second and the p50 and p99 latency.
func hammer(ctx context.Context, writers int, d time.Duration, appendOne func(g, i int) error) (float64, time.Duration, time.Duration, error) {
	var stop atomic.Bool
	var wg sync.WaitGroup
	lat := make([][]time.Duration, writers)
	errs := make([]error, writers)
	start := time.Now()
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load() && ctx.Err() == nil; i++ {
				t := time.Now()
				if err := appendOne(g, i); err != nil {
					errs[g] = err
					return
				}
				lat[g] = append(lat[g], time.Since(t))
			}
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for g := range lat {
		if errs[g] != nil {
			return 0, 0, 0, errs[g]
		}
		all = append(all, lat[g]...)
	}
	if len(all) == 0 {
		return 0, 0, 0, fmt.Errorf("no append finished in %v", d)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(float64(len(all))*p))] }
	return float64(len(all)) / elapsed.Seconds(), pct(0.50), pct(0.99), nil
}
