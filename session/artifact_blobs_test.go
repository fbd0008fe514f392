package session

import (
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/blobs"
)

// TestArtifactKeyRefusesHostileParts: no workspace id, artifact id or
// digest an attacker could get into a row makes a key outside
// ws/<workspace>/artifacts/<artifact>/, and two workspaces never share a
// key. Artifact names never enter a key at all.
func TestArtifactKeyRefusesHostileParts(t *testing.T) {
	t.Parallel()
	ws, other, art := desk.NewID(desk.PrefixWorkspace), desk.NewID(desk.PrefixWorkspace), desk.NewID(desk.PrefixArtifact)
	sha := strings.Repeat("ab", 32)
	key, err := ArtifactKey(ws, art, 3, sha)
	if err != nil || key != "ws/"+ws+"/artifacts/"+art+"/3-"+sha || blobs.ValidKey(key) != nil {
		t.Fatalf("ArtifactKey = %q, %v", key, err)
	}
	if k2, _ := ArtifactKey(other, art, 3, sha); k2 == key || !strings.HasPrefix(k2, "ws/"+other+"/") {
		t.Fatalf("another workspace's key %q collides with or escapes %q", k2, key)
	}
	hostile := []string{"", "..", "../" + ws, ws + "/..", "/" + ws, ws + "\x00", ws + "/x", strings.Repeat("a", 2000),
		"act_" + ws[3:], ws + " ", strings.ToLower(ws)}
	for _, h := range hostile {
		if k, err := ArtifactKey(h, art, 1, sha); err == nil {
			t.Errorf("workspace id %q made key %q", h, k)
		}
		if k, err := ArtifactKey(ws, h, 1, sha); err == nil {
			t.Errorf("artifact id %q made key %q", h, k)
		}
		if k, err := ArtifactKey(ws, art, 1, h); err == nil {
			t.Errorf("digest %q made key %q", h, k)
		}
	}
	if k, err := ArtifactKey(ws, art, 0, sha); err == nil {
		t.Errorf("revision 0 made key %q", k)
	}
}
