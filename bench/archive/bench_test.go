package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunSmoke runs every case briefly so the program keeps working; the
// real figures come from `go run ./bench/archive`.
func TestRunSmoke(t *testing.T) {
	var out bytes.Buffer
	res, err := run(context.Background(), config{Dir: t.TempDir(), Duration: 100 * time.Millisecond,
		Writers: []int{1, 8, 64}, TextBytes: 200}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if len(res) != 3 || !strings.Contains(out.String(), "at 64 writers") {
		t.Fatalf("results %+v", res)
	}
	for _, r := range res {
		if r.Naive <= 0 || r.Desk <= 0 || r.DeskP99 <= 0 || r.DeskRecords == 0 || r.DeskSyncs == 0 {
			t.Fatalf("empty case %+v", r)
		}
		if r.Writers == 64 && r.DeskSyncs*4 > r.DeskRecords {
			t.Fatalf("64 writers: %d fsyncs for %d records", r.DeskSyncs, r.DeskRecords)
		}
	}
}
