package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/classify"
)

// Fetch limits.
const (
	fetchMaxBytes = 8 << 20
	fetchTimeout  = 30 * time.Second
)

type acquireArgs struct {
	Action  string `json:"action" jsonschema:"enum=fetch,enum=search,enum=note" jsonschema_description:"fetch a URL, search the web, or keep a note"`
	URL     string `json:"url,omitempty" jsonschema_description:"fetch: the absolute http or https URL"`
	Query   string `json:"query,omitempty" jsonschema_description:"search: what to search for"`
	Limit   int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=20" jsonschema_description:"search: how many results; default 5"`
	Text    string `json:"text,omitempty" jsonschema_description:"note: the text to keep"`
	Title   string `json:"title,omitempty" jsonschema_description:"note: a title, also its item name; default note.md"`
	GroupID string `json:"group_id,omitempty" jsonschema_description:"note: the bound group to keep it in; default the first bound group"`
}

type acquire struct{ args[acquireArgs] }

func (acquire) Name() string { return "acquire" }
func (acquire) Description() string {
	return "Get evidence from outside: action \"fetch\" downloads a URL (HTML comes back as readable text; PDF and ZIP are described, never decoded as text); \"search\" searches the web through the configured provider; \"note\" keeps a text as an item of a group this session binds."
}
func (acquire) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t acquire) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	switch a.Action {
	case "fetch":
		if strings.TrimSpace(a.URL) == "" {
			return badArg("url", "required, missing: fetch needs a url"), nil
		}
		return fetch(ctx, env, a.URL)
	case "search":
		if strings.TrimSpace(a.Query) == "" {
			return badArg("query", "required, missing: search needs a query"), nil
		}
		if env.Search == nil {
			return Fail(CodeNotConfigured, "no search provider is configured on this desk; use fetch with a URL you know"), nil
		}
		if a.Limit == 0 {
			a.Limit = 5
		}
		hits, err := env.Search(ctx, a.Query, a.Limit)
		if err != nil {
			return Fail(CodeFetchFailed, "search failed: %v", err), nil
		}
		return &Result{Value: map[string]any{"query": a.Query, "results": hits}, Facts: map[string]any{"action": "search", "results": len(hits)}}, nil
	case "note":
		if strings.TrimSpace(a.Text) == "" {
			return badArg("text", "required, missing: note needs a text"), nil
		}
		bound, err := env.Store.ListBindings(ctx, env.Session.ID)
		if err != nil {
			return nil, err
		}
		if len(bound) == 0 {
			return Fail(CodeNotConfigured, "this session binds no selection group to keep a note in"), nil
		}
		grp := bound[0].ID
		if a.GroupID != "" {
			grp = ""
			for _, g := range bound {
				if g.ID == a.GroupID {
					grp = g.ID
				}
			}
			if grp == "" {
				return Fail(CodeNotFound, "arguments: /group_id: group %q is not bound to this session", a.GroupID), nil
			}
		}
		name := "note.md"
		if a.Title != "" {
			name = a.Title
		}
		text := a.Text
		it, err := env.Selection.AddItem(ctx, grp, desk.ItemCreate{Text: &text, Name: name, Title: a.Title})
		if err != nil {
			return fsResult(err, "the note")
		}
		return &Result{Value: map[string]any{"item_id": it.ID, "group_id": grp, "name": it.Name}, Facts: map[string]any{"action": "note", "item_id": it.ID, "group_id": grp}}, nil
	}
	return badArg("action", "got %q, want one of fetch, search, note", a.Action), nil
}

// FetchClient is an HTTP client that refuses loopback and private
// destinations, follows at most five redirects, and times out. The refusal
// is unconditional: a fetch of http://127.0.0.1:7777 would let a prompt
// reach desk's own API and the machine's other services.
func FetchClient() *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: func(network, address string, c syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip := net.ParseIP(host)
		if ip == nil || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast() {
			return fmt.Errorf("fetching %s is not allowed: a private or local address", host)
		}
		return nil
	}}
	return &http.Client{
		Timeout:   fetchTimeout,
		Transport: &http.Transport{DialContext: dialer.DialContext, Proxy: nil, TLSHandshakeTimeout: 10 * time.Second},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("more than 5 redirects")
			}
			return nil
		},
	}
}

func fetch(ctx context.Context, env *Env, raw string) (*Result, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return badArg("url", "%q is not an absolute http or https URL", raw), nil
	}
	client := env.HTTP
	if client == nil {
		client = FetchClient()
	}
	req, err := http.NewRequestWithContext(ctx, "GET", u.String(), nil)
	if err != nil {
		return badArg("url", "%q: %v", raw, err), nil
	}
	req.Header.Set("User-Agent", "desk-agent/1 (+https://github.com/desk-runtime/desk)")
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return Fail(CodeFetchFailed, "fetch %s: %v", u.Host, err), nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, fetchMaxBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return Fail(CodeFetchFailed, "reading %s: %v", u.Host, err), nil
	}
	truncated := len(body) > fetchMaxBytes
	if truncated {
		body = body[:fetchMaxBytes]
	}
	facts := map[string]any{"action": "fetch", "url": u.String(), "status": resp.StatusCode, "bytes": len(body)}
	if resp.StatusCode >= 400 {
		return &Result{Code: CodeFetchFailed, Message: resp.Status, Facts: facts,
			Value: map[string]any{"error": map[string]string{"code": CodeFetchFailed, "message": "the server answered " + resp.Status}}}, nil
	}
	class := classify.ClassifyBytes(u.Path, resp.Header.Get("Content-Type"), body)
	facts["kind"] = class.Kind
	v := map[string]any{"url": u.String(), "status": resp.StatusCode, "kind": class.Kind, "media_type": class.MediaType, "bytes": len(body), "truncated": truncated}
	switch {
	case !class.Text:
		v["text"] = nil
		v["note"] = "this is " + classify.Describe(class.Kind) + "; it is not shown as text"
		return &Result{Value: v, Facts: facts}, nil
	case classify.IsHTML(class.Kind):
		title, text := readable(body)
		v["title"], v["text"] = title, clipText(text)
	default:
		v["text"] = clipText(string(body))
	}
	out, _ := v["text"].(string)
	return &Result{Value: v, Facts: facts, Output: out}, nil
}

func clipText(s string) string {
	if len(s) <= maxRead {
		return s
	}
	s = s[:maxRead]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "\n[truncated]"
}

// readable turns HTML into its title and readable text: scripts, styles
// and navigation chrome are dropped, block elements become line breaks.
func readable(b []byte) (string, string) {
	z := html.NewTokenizer(bytes.NewReader(b))
	var out strings.Builder
	var title string
	skip := 0
	inTitle := false
	for {
		switch z.Next() {
		case html.ErrorToken:
			return strings.TrimSpace(title), collapse(out.String())
		case html.StartTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style", "noscript", "svg", "nav", "footer", "template":
				skip++
			case "title":
				inTitle = true
			case "br", "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "pre", "blockquote":
				out.WriteString("\n")
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style", "noscript", "svg", "nav", "footer", "template":
				if skip > 0 {
					skip--
				}
			case "title":
				inTitle = false
			case "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "pre", "blockquote":
				out.WriteString("\n")
			}
		case html.TextToken:
			t := string(z.Text())
			if inTitle {
				title += t
				continue
			}
			if skip == 0 {
				out.WriteString(t)
			}
		}
	}
}

// collapse squeezes runs of blank space: at most one blank line between
// paragraphs, single spaces inside lines.
func collapse(s string) string {
	var lines []string
	blank := 0
	for _, l := range strings.Split(s, "\n") {
		l = strings.Join(strings.Fields(l), " ")
		if l == "" {
			blank++
			if blank > 1 || len(lines) == 0 {
				continue
			}
		} else {
			blank = 0
		}
		lines = append(lines, l)
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
