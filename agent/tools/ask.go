package tools

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/desk-runtime/desk"
)

// ---- ask ----

type askArgs struct {
	Target  string `json:"target" jsonschema_description:"who to ask: a session's @signature, a session id (ses_…) or a workspace id (ws_…, a new session there)"`
	Subject string `json:"subject,omitempty" jsonschema_description:"one line saying what the ask is about"`
	Text    string `json:"text" jsonschema_description:"what to ask or tell the target"`
	Reply   string `json:"reply" jsonschema:"enum=caller,enum=none" jsonschema_description:"caller: the target's answer comes back to you as a dispatch_reply message in a later turn; none: nothing comes back"`
}

// ask dispatches work to another session: the dispatch service records
// who asked, where it went, the subject and who owns the reply, then
// queues the text on the target.
type askTool struct {
	args[askArgs]
}

func (askTool) Name() string { return "ask" }
func (askTool) Description() string {
	return "Ask another session (by @signature or id) or a workspace to do something. The text is queued there as an ordinary message; with reply caller, its answer reaches you later as a dispatch_reply message, in order with your other messages (do not wait for it in this turn)."
}
func (askTool) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

// Unavailable: the tool is declared only where a dispatch service exists.
func (askTool) Unavailable(env *Env) string {
	if env.Dispatch == nil {
		return "asking other sessions is not available on this desk"
	}
	return ""
}

// surfaceScoped: a desk without a dispatch service (a test's) leaves ask
// out by design, so Absent does not list it.
func (askTool) surfaceScoped() {}

func (t askTool) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	if env.Dispatch == nil {
		return Fail(CodeNotConfigured, "ask needs the dispatch service, which this desk did not give the tools"), nil
	}
	target, bad := askTarget(a.Target)
	if bad != nil {
		return bad, nil
	}
	in := desk.DispatchInput{Target: target, Subject: strings.TrimSpace(a.Subject), Text: a.Text, Reply: a.Reply}
	if call.CommandID != "" {
		in.ID = desk.PrefixDispatch + "_" + strings.TrimPrefix(call.CommandID, "cmd_")
	}
	d, res, err := env.Dispatch.Dispatch(ctx, in)
	switch desk.ErrorCode(err) {
	case "":
	case desk.EINVALID:
		return Fail(CodeBadInput, "%s", desk.ErrorMessage(err)), nil
	case desk.ENOTFOUND:
		return Fail(CodeNotFound, "%s", desk.ErrorMessage(err)), nil
	default:
		return nil, err
	}
	if d == nil {
		// The target could not be reached: nothing was recorded or sent.
		return Fail(CodeNotFound, "target %s is unavailable (%s); nothing was sent", a.Target, res.Reason), nil
	}
	v := map[string]any{"dispatch_id": d.ID, "status": d.Status, "target_session_id": d.TargetSessionID, "reply": d.Reply}
	if d.Reply == desk.ReplyCaller {
		v["note"] = "sent; the answer reaches you as a dispatch_reply message in a later turn"
	} else {
		v["note"] = "sent; nothing comes back"
	}
	return &Result{Value: v, Facts: map[string]any{"dispatch_id": d.ID}}, nil
}

// askTarget reads the tool's target: an @signature or a session id is a
// session, a workspace id a workspace.
func askTarget(s string) (desk.ResolveTarget, *Result) {
	s = strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(s, "@"), strings.HasPrefix(s, desk.PrefixSession+"_"):
		return desk.ResolveTarget{Kind: "session", ID: s}, nil
	case strings.HasPrefix(s, desk.PrefixWorkspace+"_"):
		return desk.ResolveTarget{Kind: "workspace", ID: s}, nil
	}
	return desk.ResolveTarget{}, Fail(CodeBadInput, "target %q: give a session's @signature, a session id (ses_…) or a workspace id (ws_…)", s)
}
