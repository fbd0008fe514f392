package tools

import (
	"context"
	"encoding/json"
	"io"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/session"
)

type artifactsArgs struct {
	Action    string `json:"action" jsonschema:"enum=create,enum=list,enum=inspect,enum=delete" jsonschema_description:"what to do"`
	Name      string `json:"name,omitempty" jsonschema_description:"create: the artifact's file name, with its extension; default the copied file's name"`
	Path      string `json:"path,omitempty" jsonschema_description:"create: a guest file to copy into the new artifact"`
	Immutable bool   `json:"immutable,omitempty" jsonschema_description:"create: keep it under /artifacts/immutable, where the agent cannot change or delete it"`
	ID        string `json:"id,omitempty" jsonschema_description:"inspect, delete: the artifact id (art_…)"`
	Offset    int    `json:"offset,omitempty" jsonschema:"minimum=0" jsonschema_description:"list: how many artifacts to skip; default 0"`
	Limit     int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=200" jsonschema_description:"list: how many to show; default 50"`
}

type artifactsTool struct{ args[artifactsArgs] }

func (artifactsTool) Name() string { return "artifacts" }
func (artifactsTool) Description() string {
	return "Manage this session's artifacts: \"create\" an empty artifact (name with extension) or copy a guest file into one (path), optionally immutable; \"list\" names and ids; \"inspect\" one artifact's metadata; \"delete\" one (not immutable ones). Create artifacts only for durable outputs worth keeping: reports, evidence, exports — not for answers that fit in the reply."
}
func (artifactsTool) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t artifactsTool) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
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
			return badArg("name", "required, missing: create needs a name (with its extension) or a path to copy"), nil
		}
		clean, err := session.SanitizeName(name)
		if err != nil {
			return badArg("name", "%s", desk.ErrorMessage(err)), nil
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
		if a.ID == "" {
			return badArg("id", "required, missing: %s needs an artifact id", a.Action), nil
		}
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
	return badArg("action", "got %q, want one of create, list, inspect, delete", a.Action), nil
}

func artifactJSON(a *desk.Artifact) map[string]any {
	return map[string]any{"id": a.ID, "name": a.Name, "path": a.Path, "kind": a.Kind, "media_type": a.MediaType,
		"size": a.Size, "sha256": a.SHA256, "immutable": a.Immutable, "revision": a.Revision}
}
