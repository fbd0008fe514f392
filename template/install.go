package template

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/checkout"
	"github.com/desk-runtime/desk/layout"
)

// installData is the journal state of an install.
type installData struct {
	Template    string    `json:"template"`
	Version     string    `json:"version"`
	InstalledAt time.Time `json:"installed_at"`
}

// CreateWorkspace creates a workspace from a template ("name" for the
// version registered last, or "name@version"): the template's files land
// in checkout/ and the managed ones become the workspace's baseline. The
// template is resolved first, so naming an unknown one creates nothing.
func (s *Service) CreateWorkspace(ctx context.Context, in desk.WorkspaceCreate, ref string) (*desk.Workspace, error) {
	if err := desk.RequireAdmin(ctx, "create workspaces"); err != nil {
		return nil, err
	}
	tn, tver := ParseRef(ref)
	tv, err := s.Get(tn, tver)
	if desk.IsCode(err, desk.ENOTFOUND) {
		return nil, desk.Errorf(desk.EINVALID, "template %q is not registered; see GET /v1/templates", ref)
	}
	if err != nil {
		return nil, err
	}
	w, err := s.workspaces.CreateWorkspace(ctx, in)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(s.home.Workspace(w.ID))
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", w.ID, err)
	}
	defer root.Close()
	// The journal is written before the first file; if desk stops half
	// way, Recover finishes the install from the same template version.
	d := installData{Template: tv.Name, Version: tv.Version, InstalledAt: desk.Now()}
	if err := s.install(ctx, root, tv, d); err != nil {
		return nil, fmt.Errorf("install template %s %s into %s: %w", tv.Name, tv.Version, w.ID, err)
	}
	s.opt.Logger.Info("workspace created from template", desk.LogWorkspaceID, w.ID, desk.LogTemplate, tv.Name, "version", tv.Version)
	return w, nil
}

func (s *Service) install(ctx context.Context, root *os.Root, tv *desk.TemplateVersion, d installData) error {
	changes, baseline, err := s.installChanges(tv, d)
	if err != nil {
		return err
	}
	j, err := checkout.Begin(ctx, root, opInstall, changes, "", d)
	if err != nil {
		return err
	}
	return s.finishInstall(j, tv, baseline)
}

// installChanges lists every template file under checkout/ and, last, the
// baseline of the managed ones.
func (s *Service) installChanges(tv *desk.TemplateVersion, d installData) ([]checkout.Change, []byte, error) {
	var changes []checkout.Change
	var managed []string
	for _, f := range tv.Files {
		changes = append(changes, checkout.Change{Path: layout.CheckoutDir + "/" + f.Path, SHA256: f.SHA256})
		if f.Managed {
			managed = append(managed, f.Path)
		}
	}
	files, err := s.content(tv, managed)
	if err != nil {
		return nil, nil, err
	}
	bl := desk.TemplateBaseline{Template: tv.Name, Version: tv.Version, InstalledAt: d.InstalledAt, Files: files}
	b, err := json.MarshalIndent(bl, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	changes = append(changes, checkout.Change{Path: layout.TemplateBaseline, SHA256: checkout.SHA256(b)})
	return changes, b, nil
}

func (s *Service) finishInstall(j *checkout.Journal, tv *desk.TemplateVersion, baseline []byte) error {
	err := j.Apply(func(i int, c checkout.Change) (io.ReadCloser, error) {
		if i == len(tv.Files) {
			return io.NopCloser(bytes.NewReader(baseline)), nil
		}
		return s.openVersionFile(tv, tv.Files[i].Path)
	}, func(int) error { return s.hook("install") })
	if err != nil {
		return err
	}
	return j.Finish()
}

// recoverInstall finishes an install from the template version its
// journal names: a workspace asked for with a template gets it.
func (s *Service) recoverInstall(ctx context.Context, ws string, root *os.Root) error {
	j, err := checkout.Load(root, opInstall)
	if err != nil || j == nil {
		return err
	}
	var d installData
	if err := j.Decode(&d); err != nil {
		return fmt.Errorf("read install journal: %w", err)
	}
	tv, err := s.Get(d.Template, d.Version)
	if err != nil {
		return fmt.Errorf("template of the interrupted install: %w", err)
	}
	_, baseline, err := s.installChanges(tv, d)
	if err != nil {
		return err
	}
	if len(j.Changes) != len(tv.Files)+1 {
		return fmt.Errorf("install journal of %s does not match template %s %s", ws, tv.Name, tv.Version)
	}
	s.opt.Logger.Info("finishing an interrupted template install", desk.LogWorkspaceID, ws, desk.LogTemplate, tv.Name, "version", tv.Version)
	return s.finishInstall(j, tv, baseline)
}
