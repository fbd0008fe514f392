package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
)

// TestRuntimeSessionHeader: a runtime-backed session's page names its
// runtime, the runtime's protocol and the native conversation id, and
// its composer is usable without a desk model.
func TestRuntimeSessionHeader(t *testing.T) {
	f := start(t, app.Config{})
	f.e.Must(201, "POST", "/v1/runtimes", map[string]any{"name": "house-agent", "protocol": desk.RuntimeACP,
		"argv": []string{"/bin/true"}, "env": []string{}}, nil)
	var x desk.Session
	f.e.Must(201, "POST", "/v1/workspaces/"+f.ws.ID+"/sessions", map[string]any{"title": "Runtime backed", "runtime": "house-agent"}, &x)
	b := signIn(t, f.e)
	page := func() string {
		body, resp := b.get("/w/" + f.ws.ID + "/s/" + x.ID)
		if resp.StatusCode != 200 {
			t.Fatalf("session page = %d", resp.StatusCode)
		}
		return body
	}
	body := page()
	for _, want := range []string{`<strong class="rt-name">house-agent</strong>`, `<span class="rt-protocol">acp</span>`, "no native conversation yet"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, `id="composer-text" name="text" rows="3" placeholder="Message the agent — Enter sends, Shift+Enter adds a line" disabled`) {
		t.Error("the composer of a runtime-backed session is disabled for want of a desk model")
	}
	// The native id, once the runtime reported it.
	if err := f.e.App.Store.SetSessionNativeID(context.Background(), x.ID, "sess-7f3a-native"); err != nil {
		t.Fatal(err)
	}
	if body = page(); !strings.Contains(body, `<code class="rt-native">sess-7f3a-native</code>`) {
		t.Error("the page does not show the native id")
	}
	// A session without a runtime shows its model, and no runtime badge.
	y := f.script(t, "Plain", map[string]any{"text": "hi"})
	plain, _ := b.get("/w/" + f.ws.ID + "/s/" + y.ID)
	if strings.Contains(plain, `id="ses-runtime"`) || !strings.Contains(plain, `class="badge model"`) {
		t.Error("a desk-agent session shows a runtime badge or no model")
	}
}
