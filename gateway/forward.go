package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/provider"
)

// hopHeaders are never forwarded either way (RFC 9110 7.6.1), nor are the
// child's credentials, its idea of the host, cookies or its encodings
// (desk's transport asks for and undoes compression itself, so the usage
// can be read).
var dropRequest = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Authorization": true, "X-Api-Key": true, "Api-Key": true, "Cookie": true, "Host": true, "Content-Length": true,
	"Accept-Encoding": true, "Forwarded": true, "X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true,
	"Openai-Organization": true, "Openai-Project": true,
}

var dropResponse = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Proxy-Authenticate": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true, "Set-Cookie": true,
}

// ServeHTTP serves the child.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !e.authorized(r) {
		// Unread: a refused body is not waited for.
		w.Header().Set("Connection", "close")
		errorJSON(w, http.StatusUnauthorized, "authentication_error", "desk's model gateway: this credential is not this runtime child's (it changes whenever the child restarts)")
		return
	}
	rt, ok := routeOf(r)
	if !ok {
		errorJSON(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("desk's model gateway serves POST /v1/responses, /v1/chat/completions, /v1/messages, /v1/messages/count_tokens and GET /v1/models; not %s %s", r.Method, r.URL.Path))
		return
	}
	g := e.g
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.o.MaxBody))
	if err != nil {
		errorJSON(w, http.StatusRequestEntityTooLarge, "invalid_request_error", fmt.Sprintf("desk's model gateway: the request body is over %d bytes or could not be read", g.o.MaxBody))
		return
	}
	var id uint64
	var turn Turn
	if rt.model {
		id, turn = e.begin()
	}
	fail := func(status int, why string) {
		if rt.model {
			e.end(id, why)
		}
		g.o.Logger.Warn("model gateway call failed", desk.LogSessionID, turn.SessionID, "runtime", turn.Runtime, "path", r.URL.Path, "reason", why)
		errorJSON(w, status, "api_error", "desk's model gateway: "+why)
	}
	base, key, _, err := g.upstream(rt.provider)
	if err != nil {
		fail(http.StatusServiceUnavailable, err.Error())
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	if rt.model || rt.path == "/v1/messages/count_tokens" {
		if why, ok := g.declared(rt.provider, req.Model); !ok {
			// Refused in the provider's own shape, as its 400 for a bad
			// request would be, so the runtime shows it rather than
			// retrying; nothing reaches the provider.
			if rt.model {
				e.end(id, why)
			}
			g.o.Logger.Warn("model gateway refused an undeclared model", desk.LogSessionID, turn.SessionID, "runtime", turn.Runtime, "model", req.Model)
			errorJSON(w, http.StatusBadRequest, "invalid_request_error", "desk's model gateway: "+why)
			return
		}
	}
	if rt.provider == "openai" && rt.path == "/chat/completions" && req.Stream {
		body = includeUsage(body)
	}
	target := base + rt.path
	if r.URL.RawQuery != "" {
		// Claude Code calls /v1/messages?beta=true; the query is the
		// API's own, the host never the child's.
		target += "?" + r.URL.RawQuery
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	out, err := http.NewRequestWithContext(ctx, r.Method, target, bytes.NewReader(body))
	if err != nil {
		fail(http.StatusBadGateway, "bad upstream request: "+err.Error())
		return
	}
	for k, vs := range r.Header {
		if !dropRequest[http.CanonicalHeaderKey(k)] {
			out.Header[k] = vs
		}
	}
	if rt.provider == "anthropic" {
		out.Header.Set("x-api-key", key)
		if out.Header.Get("anthropic-version") == "" {
			out.Header.Set("anthropic-version", "2023-06-01")
		}
	} else {
		out.Header.Set("Authorization", "Bearer "+key)
	}
	endpoint := provider.EndpointOf(base)
	res, err := g.client.Do(out)
	if err != nil {
		fail(http.StatusBadGateway, fmt.Sprintf("cannot reach the provider at %s: %s", endpoint, provider.Redact(transportError(err), key)))
		return
	}
	defer res.Body.Close()
	for k, vs := range res.Header {
		if !dropResponse[http.CanonicalHeaderKey(k)] {
			w.Header()[k] = vs
		}
	}
	if res.StatusCode >= 400 {
		// An error answer is read whole (bounded) and cut free of the
		// key before the child sees it.
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		b = []byte(provider.Redact(string(b), key))
		w.WriteHeader(res.StatusCode)
		w.Write(b)
		if rt.model {
			e.end(id, fmt.Sprintf("the provider at %s answered %d%s", endpoint, res.StatusCode, errorSummary(b, key)))
		}
		return
	}
	w.WriteHeader(res.StatusCode)
	u := &usageReader{provider: rt.provider, sse: strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream")}
	fl, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	var rerr error
	for {
		n, err := res.Body.Read(buf)
		if n > 0 {
			u.Write(buf[:n])
			if _, werr := w.Write(buf[:n]); werr != nil {
				rerr = werr
				break
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			rerr = err
			break
		}
	}
	if !rt.model {
		return
	}
	got, ok := u.usage()
	if ok {
		e.record(turn, rt.provider, firstNonEmpty(got.model, req.Model), got)
	}
	switch {
	case rerr != nil && r.Context().Err() == nil && !ok:
		e.end(id, fmt.Sprintf("the provider's answer from %s broke off: %s", endpoint, provider.Redact(transportError(rerr), key)))
	default:
		e.end(id, "")
	}
}

// record writes a call's usage. Tokens spent count against the budget
// even when the turn is being interrupted: the write is not cancelled.
func (e *Endpoint) record(t Turn, prov, model string, u counts) {
	if e.g.o.Usage == nil || t.SessionID == "" {
		return
	}
	name := prov
	if model != "" {
		name = prov + ":" + model
	}
	mu := &desk.ModelUsage{WorkspaceID: t.WorkspaceID, SessionID: t.SessionID, SurfaceID: t.SurfaceID, ExecutionID: t.ExecutionID,
		ActorID: t.ActorID, Purpose: desk.UsageTurn, Model: name, InputTokens: u.input, OutputTokens: u.output, CachedTokens: u.cached}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.g.o.Usage.RecordUsage(ctx, mu); err != nil {
		e.g.o.Logger.Error("record runtime model usage", desk.LogErr, err, desk.LogSessionID, t.SessionID)
	}
}

// includeUsage asks a streamed Chat Completions call for its usage
// (stream_options.include_usage), which the API sends only when asked;
// everything else of the body stays as the child wrote it.
func includeUsage(body []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	var so map[string]json.RawMessage
	if raw, ok := m["stream_options"]; ok && json.Unmarshal(raw, &so) != nil {
		return body
	}
	if so == nil {
		so = map[string]json.RawMessage{}
	}
	so["include_usage"] = json.RawMessage("true")
	m["stream_options"], _ = json.Marshal(so)
	b, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return b
}

// errorSummary is the provider's error type and message, cut to 300
// characters and redacted, for a reason a person reads.
func errorSummary(body []byte, key string) string {
	msg, code := provider.ErrorBody(body)
	s := strings.TrimSpace(strings.Join(nonEmpty(code, msg), ": "))
	if s == "" {
		return ""
	}
	s = provider.Redact(s, key)
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "…"
	}
	return " (" + s + ")"
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// transportError is a transport failure without the request's URL
// (which Go's errors repeat).
func transportError(err error) string {
	if ue, ok := err.(*url.Error); ok {
		err = ue.Err
	}
	return err.Error()
}

// declared reports whether the operator offers model of provider, and
// when not, why, naming what is offered.
func (g *Gateway) declared(providerName, model string) (string, bool) {
	if model == "" {
		return "the request names no model; desk forwards calls only for the models its operator declared (DESK_MODEL, DESK_MODELS)", false
	}
	if g.o.Models != nil {
		if _, ok := g.o.Models.Find(providerName, model); ok {
			return "", true
		}
	}
	var offered []string
	if g.o.Models != nil {
		for _, m := range g.o.Models.Models() {
			if strings.HasPrefix(m, providerName+":") {
				offered = append(offered, strings.TrimPrefix(m, providerName+":"))
			}
		}
	}
	if len(offered) == 0 {
		return fmt.Sprintf("model %q is not offered by this desk: its operator declared no %s models (DESK_MODEL, DESK_MODELS)", model, providerName), false
	}
	return fmt.Sprintf("model %q is not offered by this desk; its %s models are: %s (the operator declares them in DESK_MODEL and DESK_MODELS)", model, providerName, strings.Join(offered, ", ")), false
}
