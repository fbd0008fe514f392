package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/desk-runtime/desk"
)

// Templates, template upgrades and absorbs.

// AddTemplate registers a template version (admin token only). Each file's
// Content holds its bytes.
func (c *Client) AddTemplate(ctx context.Context, name, version string, files []desk.TemplateFile) (*desk.TemplateVersion, error) {
	type file struct {
		Path    string `json:"path"`
		Content []byte `json:"content"`
	}
	in := struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		Files   []file `json:"files"`
	}{Name: name, Version: version, Files: []file{}}
	for _, f := range files {
		in.Files = append(in.Files, file{Path: f.Path, Content: f.Content})
	}
	var tv desk.TemplateVersion
	if err := c.doJSON(ctx, http.MethodPost, "/v1/templates", in, &tv); err != nil {
		return nil, err
	}
	return &tv, nil
}

// ListTemplates lists every registered template version.
func (c *Client) ListTemplates(ctx context.Context) ([]*desk.TemplateVersion, error) {
	var out desk.TemplateList
	if err := c.doJSON(ctx, http.MethodGet, "/v1/templates", nil, &out); err != nil {
		return nil, err
	}
	return out.Templates, nil
}

func toQuery(to string) url.Values {
	q := url.Values{}
	if to != "" {
		q.Set("to", to)
	}
	return q
}

// PlanTemplateUpgrade computes the upgrade of a workspace to a version of
// its template ("" for the version registered last).
func (c *Client) PlanTemplateUpgrade(ctx context.Context, ws, to string) (*desk.UpgradePlan, error) {
	var p desk.UpgradePlan
	if err := c.doJSON(ctx, http.MethodGet, withQuery("/v1/workspaces/"+esc(ws)+"/template-upgrade", toQuery(to)), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ApplyTemplateUpgrade applies exactly the plan with in.Digest.
func (c *Client) ApplyTemplateUpgrade(ctx context.Context, ws, to string, in desk.UpgradeApply) (*desk.UpgradeResult, error) {
	var r desk.UpgradeResult
	if err := c.doJSON(ctx, http.MethodPost, withQuery("/v1/workspaces/"+esc(ws)+"/template-upgrade", toQuery(to)), in, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func absorbPath(target, source string) string {
	return withQuery("/v1/workspaces/"+esc(target)+"/absorb", url.Values{"source": {source}})
}

// PlanAbsorb computes what absorbing source into target would do.
func (c *Client) PlanAbsorb(ctx context.Context, target, source string) (*desk.AbsorbPlan, error) {
	var p desk.AbsorbPlan
	if err := c.doJSON(ctx, http.MethodGet, absorbPath(target, source), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ApplyAbsorb applies exactly the absorb plan with in.Digest.
func (c *Client) ApplyAbsorb(ctx context.Context, target, source string, in desk.AbsorbApply) (*desk.AbsorbResult, error) {
	var r desk.AbsorbResult
	if err := c.doJSON(ctx, http.MethodPost, absorbPath(target, source), in, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
