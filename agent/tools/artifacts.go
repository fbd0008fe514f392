package tools

import (
	"context"
	"encoding/json"
	"io"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/session"
)

type artifactsTool struct{}

func (artifactsTool) Name() string { return "artifacts" }
func (artifactsTool) Description() string {
	return "Manage this session's artifacts: \"create\" an empty artifact (name with extension) or copy a guest file into one (path), optionally immutable; \"list\" names and ids; \"inspect\" one artifact's metadata; \"delete\" one (not immutable ones). Create artifacts only for durable outputs worth keeping: reports, evidence, exports — not for answers that fit in the reply."
}
func (artifactsTool) Schema() json.RawMessage {
	return schema(`{"type":"object","properties":{"action":{"type":"string","enum":["create","list","inspect","delete"]},"name":{"type":"string"},"path":{"type":"string"},"immutable":{"type":"boolean"},"id":{"type":"string"},"offset":{"type":"integer","minimum":0},"limit":{"type":"integer","minimum":1,"maximum":200}},"required":["action"],"additionalProperties":false}`)
}
func (artifactsTool) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (artifactsTool) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	var a struct {
		Action, Name, Path, ID string
		Immutable              bool
		Offset, Limit          int
	}
	if r := decode(call.Args, &a); r != nil {
		return r, nil
	}
	switch a.Action {
	case "create":
		name := a.Name
		var body io.Reader
		size := int64(0)
		if a.Path != "" {
			st, err := env.Jail.Stat(a.Path)
			if err != nil {
				return fsResult(err, a.Path)
			}
			f, err := env.Jail.Open(a.Path)
			if err != nil {
				return fsResult(err, a.Path)
			}
			defer f.Close()
			body, size = f, st.Size
			if name == "" {
				name = st.Name
			}
		}
		if name == "" {
			return Fail(CodeBadInput, "create needs a name (with its extension) or a path to copy"), nil
		}
		clean, err := session.SanitizeName(name)
		if err != nil {
			return Fail(CodeBadInput, "%s", desk.ErrorMessage(err)), nil
		}
		rel := clean
		if a.Immutable {
			rel = session.ImmutableDir + "/" + clean
		}
		if _, err := env.Store.ArtifactByPath(ctx, env.Session.ID, rel); err == nil {
			return Fail(CodeBadInput, "an artifact already exists at /artifacts/%s; write_file updates it", rel), nil
		}
		art, _, err := env.Paths.PutPath(ctx, env.Session.ID, rel, desk.ArtifactPathPut{Body: body, Size: size})
		if err != nil {
			return fsResult(err, "/artifacts/"+rel)
		}
		return &Result{Value: artifactJSON(art), Facts: map[string]any{"action": "create", "artifact_id": art.ID, "path": art.Path}, Artifacts: []string{art.ID}}, nil
	case "list":
		arts, err := env.Store.ListArtifacts(ctx, env.Session.ID)
		if err != nil {
			return nil, err
		}
		if a.Limit == 0 {
			a.Limit = 50
		}
		page := pageOf(arts, a.Offset, a.Limit)
		out := make([]map[string]any, 0, len(page))
		for _, x := range page {
			out = append(out, map[string]any{"id": x.ID, "name": x.Name, "path": x.Path, "kind": x.Kind})
		}
		return &Result{Value: map[string]any{"total": len(arts), "artifacts": out}, Facts: map[string]any{"action": "list", "artifacts": len(out)}}, nil
	case "inspect", "delete":
		art, err := env.Store.GetArtifact(ctx, a.ID)
		if err != nil || art.SessionID != env.Session.ID {
			return Fail(CodeNotFound, "artifact %q is not an artifact of this session", a.ID), nil
		}
		if a.Action == "inspect" {
			return &Result{Value: artifactJSON(art), Facts: map[string]any{"action": "inspect", "artifact_id": art.ID}}, nil
		}
		if art.Immutable {
			return Fail(CodeImmutable, "%s is immutable; the agent cannot delete it", art.Path), nil
		}
		if _, err := env.Paths.DeleteByPath(ctx, env.Session.ID, art.RelPath); err != nil {
			return fsResult(err, art.Path)
		}
		return &Result{Value: map[string]any{"deleted": art.ID}, Facts: map[string]any{"action": "delete", "artifact_id": art.ID}}, nil
	}
	return Fail(CodeBadInput, "action %q must be create, list, inspect or delete", a.Action), nil
}

func artifactJSON(a *desk.Artifact) map[string]any {
	return map[string]any{"id": a.ID, "name": a.Name, "path": a.Path, "kind": a.Kind, "media_type": a.MediaType,
		"size": a.Size, "sha256": a.SHA256, "immutable": a.Immutable, "revision": a.Revision}
}
