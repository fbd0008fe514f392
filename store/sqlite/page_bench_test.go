package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/store/sqlite"
)

// BenchmarkTranscriptPage reads the newest page (50) of transcripts of
// growing length: a page should cost about the same whatever the length
// (the walk of the active branch stops once the page is full).
//
//	go test -run '^$' -bench TranscriptPage ./store/sqlite
func BenchmarkTranscriptPage(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "desk.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			now := desk.Now()
			w := &desk.Workspace{ID: desk.NewID(desk.PrefixWorkspace), Name: "bench", State: desk.WorkspaceActive, CreatedAt: now, UpdatedAt: now}
			a := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w.ID, Name: desk.OwnerActorName, Kind: desk.ActorHuman, CreatedAt: now}
			if err := s.CreateWorkspace(ctx, w, a, true); err != nil {
				b.Fatal(err)
			}
			x := &desk.Session{ID: desk.NewID(desk.PrefixSession), Signature: desk.NewSignature(), WorkspaceID: w.ID, Actor: a.ID,
				Title: "bench", Lifecycle: desk.SessionActive, CreatedAt: now, UpdatedAt: now,
				Origin: desk.Origin{WorkspaceID: w.ID, Actor: desk.AdminActor, Kind: desk.OriginUser}}
			if err := s.CreateSession(ctx, x); err != nil {
				b.Fatal(err)
			}
			for i := range n {
				m := &desk.Message{ID: desk.NewID("msg"), SessionID: x.ID, SurfaceID: x.SurfaceID, ExecutionID: "exe_bench",
					Role: desk.RoleUser, Text: fmt.Sprintf("message %d", i), CreatedAt: now}
				if err := s.AppendMessage(ctx, m); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				ms, err := s.ListMessages(ctx, x.SurfaceID, 0, 50)
				if err != nil || len(ms) != 50 {
					b.Fatalf("page: %d messages, %v", len(ms), err)
				}
			}
		})
	}
}
