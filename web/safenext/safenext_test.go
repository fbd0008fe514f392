package safenext

import (
	"net/url"
	"strings"
	"testing"
)

// nextSeeds are the hostile and the ordinary redirects the fuzzer starts
// from (the same strings are in testdata/fuzz/FuzzSafeNext).
var nextSeeds = []string{
	"/%09/evil.example", "//evil", "/\\evil", "/%2F%2Fevil", "\t/evil", "https://evil",
	"/ok?x=1#f", "/%5Cevil", "/%252F%252Fevil", "/\t/evil", "/\n/evil", "/%0a/evil", "/%0d%0a/evil",
	"/a/../\\evil", "///evil", "/%2f/evil", "\\\\evil", "javascript:alert(1)", "", "/",
	"/w/ws_1/s/ses_1", "/w/ws_1/s/ses_1?tab=files#top", "/%zz", "/\u2028/evil",
}

// TestSafeNext pins the answers to the named cases: every hostile one
// goes to /, every page of desk stays.
func TestSafeNext(t *testing.T) {
	t.Parallel()
	keep := map[string]bool{"/": true, "/ok?x=1#f": true, "/w/ws_1/s/ses_1": true, "/w/ws_1/s/ses_1?tab=files#top": true}
	for _, in := range nextSeeds {
		want := "/"
		if keep[in] {
			want = in
		}
		if got := Path(in); got != want {
			t.Errorf("Path(%q) = %q, want %q", in, got, want)
		}
	}
}

// browserNormalise is what a WHATWG URL parser does to a Location before
// it resolves it: ASCII tab and newline vanish anywhere, and `\` is `/`
// in an http URL.
func browserNormalise(s string) string {
	s = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(s)
	return strings.ReplaceAll(s, "\\", "/")
}

// FuzzSafeNext checks the property: whatever comes in, what comes out
// starts with exactly one `/` and, resolved against desk's own address as
// it is and as a browser normalises it, and after one more layer of
// percent-decoding, stays on desk's host.
func FuzzSafeNext(f *testing.F) {
	for _, s := range nextSeeds {
		f.Add(s)
	}
	base, _ := url.Parse("http://desk.local/")
	f.Fuzz(func(t *testing.T, raw string) {
		got := Path(raw)
		if !strings.HasPrefix(got, "/") || strings.HasPrefix(got, "//") {
			t.Fatalf("Path(%q) = %q: not one leading /", raw, got)
		}
		if got != "/" && got != raw {
			t.Fatalf("Path(%q) = %q: changed instead of keeping or refusing", raw, got)
		}
		forms := []string{got, browserNormalise(got)}
		if dec, err := url.PathUnescape(got); err == nil {
			forms = append(forms, dec, browserNormalise(dec))
		}
		for _, form := range forms {
			if strings.HasPrefix(form, "//") {
				t.Fatalf("Path(%q) = %q reads as %q, a network path", raw, got, form)
			}
			u, err := url.Parse(form)
			if err != nil {
				continue // no browser follows what does not parse either
			}
			if r := base.ResolveReference(u); r.Host != "desk.local" || r.Scheme != "http" {
				t.Fatalf("Path(%q) = %q resolves (as %q) to %s", raw, got, form, r)
			}
		}
	})
}
