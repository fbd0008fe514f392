package models

import (
	"testing"

	"github.com/desk-runtime/desk"
)

// TestSessionModel: a session's model and script are checked together
// (the check session.Service made itself before it linked no provider).
func TestSessionModel(t *testing.T) {
	t.Parallel()
	c, err := New("openai:gpt-4.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	script := []byte(`{"steps":[{"text":"hi"}]}`)
	for _, tc := range []struct {
		model  string
		script []byte
		want   string
		bad    bool
	}{
		{"", nil, "", false},
		{"", script, "", true}, // a script needs the script model
		{"openai:gpt-4.1", nil, "openai:gpt-4.1", false},
		{" openai:gpt-4.1 ", nil, "openai:gpt-4.1", false},
		{"openai:gpt-4.1", script, "", true},      // only the script model takes a script
		{"anthropic:claude-x", nil, "", true},     // not declared
		{"script", nil, "", true},                 // the script model needs a script
		{"script", []byte(`{"steps":`), "", true}, // that parses
	} {
		got, err := c.SessionModel(tc.model, tc.script)
		if tc.bad {
			if !desk.IsCode(err, desk.EINVALID) {
				t.Errorf("SessionModel(%q, %q) = %q, %v; want EINVALID", tc.model, tc.script, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("SessionModel(%q, %q) = %q, %v; want %q", tc.model, tc.script, got, err, tc.want)
		}
	}
}
