package provider

import (
	"net/url"
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	for s, want := range map[string]Spec{
		"openai:gpt-4.1":               {Provider: "openai", Model: "gpt-4.1"},
		" anthropic:claude-sonnet-4-5": {Provider: "anthropic", Model: "claude-sonnet-4-5"},
		"script":                       {Provider: "script"},
		"openai-compatible:http://127.0.0.1:11434/v1#llama3.1:8b": {Provider: "openai-compatible", BaseURL: "http://127.0.0.1:11434/v1", Model: "llama3.1:8b"},
		"openai-compatible:https://[::1]:8000/v1#a#b":             {Provider: "openai-compatible", BaseURL: "https://[::1]:8000/v1", Model: "a#b"},
	} {
		got, err := ParseSpec(s)
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "openai", "openai:", "gemini:pro", "openai:gpt 4", "anthropic:claude\nx", "openai:\xff",
		"openai-compatible:http://#m", "openai-compatible:http://:80/v1#m", "openai-compatible:file:///etc/passwd#m",
		"openai-compatible:http:example.com#m", "openai-compatible:http://h/v1", "openai-compatible:http://h/v1#",
		"openai-compatible:ftp://h/v1#m", "openai-compatible:http://h/a b#m", "openai:" + strings.Repeat("x", MaxSpecLen)} {
		if got, err := ParseSpec(s); err == nil {
			t.Errorf("%q accepted as %+v", s, got)
		}
	}
}

// FuzzModelSpec: the model-name parser never panics; whatever it accepts
// reads back the same through String; an accepted openai-compatible spec
// names an http or https URL with a host, and no accepted name carries a
// space or a control character.
func FuzzModelSpec(f *testing.F) {
	for _, s := range []string{"openai:gpt-4.1", "anthropic:claude-sonnet-4-5", "script",
		"openai-compatible:http://127.0.0.1:8080/v1#m", "openai-compatible:https://h/v1#a#b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := ParseSpec(s)
		if err != nil {
			if spec != (Spec{}) {
				t.Fatalf("%q: refused (%v) but returned %+v", s, err, spec)
			}
			return
		}
		str := spec.String()
		if str != strings.TrimSpace(s) {
			t.Fatalf("%q: String gives %q", s, str)
		}
		again, err := ParseSpec(str)
		if err != nil || again != spec {
			t.Fatalf("%q: %q reads back as %+v, %v; want %+v", s, str, again, err, spec)
		}
		switch spec.Provider {
		case "script":
			return
		case "openai-compatible":
			u, err := url.Parse(spec.BaseURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
				t.Fatalf("%q: accepted base URL %q (%v)", s, spec.BaseURL, err)
			}
		case "openai", "anthropic":
			if spec.BaseURL != "" {
				t.Fatalf("%q: a base URL for %s", s, spec.Provider)
			}
		default:
			t.Fatalf("%q: provider %q", s, spec.Provider)
		}
		if spec.Model == "" || strings.ContainsFunc(spec.Model+spec.BaseURL, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			t.Fatalf("%q: accepted model %q at %q", s, spec.Model, spec.BaseURL)
		}
	})
}
