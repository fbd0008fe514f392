package models

import (
	"slices"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
)

func TestCatalog(t *testing.T) {
	t.Parallel()
	c, err := New("openai:gpt-4.1", Split(" anthropic:claude-sonnet-4-5, ,openai-compatible:HTTP://LLM.internal:8000/v1/#qwen,openai:gpt-4.1,"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"openai:gpt-4.1", "anthropic:claude-sonnet-4-5", "openai-compatible:HTTP://LLM.internal:8000/v1/#qwen", "script"}
	if got := c.Models(); !slices.Equal(got, want) {
		t.Fatalf("Models %q, want %q", got, want)
	}
	if c.Default() != "openai:gpt-4.1" || len(c.Declared()) != 3 {
		t.Fatalf("default %q, declared %+v", c.Default(), c.Declared())
	}
	for in, out := range map[string]string{
		"":                            "",
		"script":                      "script",
		" openai:gpt-4.1 ":            "openai:gpt-4.1",
		"anthropic:claude-sonnet-4-5": "anthropic:claude-sonnet-4-5",
		// The same server, spelt differently, is the declared entry.
		"openai-compatible:http://llm.internal:8000/v1#qwen": "openai-compatible:HTTP://LLM.internal:8000/v1/#qwen",
	} {
		if got, err := c.Resolve(in); err != nil || got != out {
			t.Errorf("Resolve(%q) = %q, %v; want %q", in, got, err, out)
		}
	}
	for _, in := range []string{"openai:gpt-5", "anthropic:claude-opus-4-1", "openai-compatible:http://127.0.0.1:9/v1#qwen",
		"openai-compatible:http://llm.internal:8000/v2#qwen", "openai-compatible:http://llm.internal:8000/v1#other", "not a model"} {
		_, err := c.Resolve(in)
		if !desk.IsCode(err, desk.EINVALID) {
			t.Errorf("Resolve(%q): %v, want invalid", in, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "openai:gpt-4.1 (default), anthropic:claude-sonnet-4-5, openai-compatible:HTTP://LLM.internal:8000/v1/#qwen, script") {
			t.Errorf("Resolve(%q): %q does not name the allowed models", in, msg)
		}
	}
	if s, ok := c.Find("openai-compatible", "qwen"); !ok || s.BaseURL != "HTTP://LLM.internal:8000/v1/" {
		t.Errorf("Find: %+v %v", s, ok)
	}
	if _, ok := c.Find("openai", "gpt-5"); ok {
		t.Error("Find found an undeclared model")
	}
}

func TestCatalogRefusesBadEntries(t *testing.T) {
	t.Parallel()
	if _, err := New("openai:gpt-4.1", []string{"anthropic:claude", "openai-compatible:ftp://h#m"}); err == nil ||
		!strings.Contains(err.Error(), `DESK_MODELS entry "openai-compatible:ftp://h#m"`) {
		t.Errorf("bad entry: %v", err)
	}
	if _, err := New("gemini:pro", nil); err == nil || !strings.Contains(err.Error(), "DESK_MODEL") {
		t.Errorf("bad default: %v", err)
	}
}

func TestCatalogWithoutModels(t *testing.T) {
	t.Parallel()
	for _, c := range []*Catalog{nil, must(New("", nil))} {
		if !slices.Equal(c.Models(), []string{"script"}) || c.Default() != "" {
			t.Errorf("%+v: %q %q", c, c.Models(), c.Default())
		}
		if err := c.Check("openai:gpt-4.1"); !desk.IsCode(err, desk.EINVALID) || !strings.Contains(err.Error(), "choose one of: script") {
			t.Errorf("%v", err)
		}
		if _, err := c.Spec(""); !desk.IsCode(err, desk.EINVALID) {
			t.Errorf("no default: %v", err)
		}
	}
	c := must(New("script", []string{"openai:gpt-4.1"}))
	if got := c.Models(); !slices.Equal(got, []string{"script", "openai:gpt-4.1"}) || c.Default() != "script" {
		t.Errorf("script default: %q", got)
	}
}

func must(c *Catalog, err error) *Catalog {
	if err != nil {
		panic(err)
	}
	return c
}
