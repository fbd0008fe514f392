package web

import "testing"

// TestIDSuffixes: the suffix grows until it tells the equal names apart,
// and only equal names get one.
func TestIDSuffixes(t *testing.T) {
	got := idSuffixes(
		[]string{"acme", "acme", "acme", "solo"},
		[]string{"ws_111abc", "ws_222abc", "ws_333xyz", "ws_444abc"})
	want := map[string]string{"ws_111abc": "…1abc", "ws_222abc": "…2abc", "ws_333xyz": "…xyz"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for id, s := range want {
		if got[id] != s {
			t.Errorf("suffix of %s = %q, want %q", id, got[id], s)
		}
	}
	if got := idSuffixes([]string{"a", "b"}, []string{"ws_1", "ws_2"}); len(got) != 0 {
		t.Errorf("distinct names got suffixes %v", got)
	}
}
