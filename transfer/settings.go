package transfer

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/hostpath"
)

// settings is what an import takes from the archive's workspaces row that
// PATCH would otherwise decide: the host paths and primary root (PATCH
// /workspaces/{ws}) and the agent settings, token budget included (PATCH
// /workspaces/{ws}/agent). They
// are checked by the same validators as those routes, so an archive cannot
// declare what a request could not (desk's home as a host path, say), and
// the refusal carries the same message.
type settings struct {
	hostPaths   string // re-encoded, with this host's directory identities
	primaryRoot string
	agent       desk.AgentSettings
}

// checkSettings reads the workspaces row from the unpacked meta/ and
// validates its settings. It runs before the tree is moved into place, so
// a refusal leaves nothing behind.
func (x *extractor) checkSettings() (*settings, error) {
	if x.chunks["workspaces"] == 0 {
		return nil, desk.Errorf(desk.EINVALID, "the archive has no workspaces row")
	}
	f, err := x.meta.Open(path.Base(chunkName("workspaces", 1)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReader(f))
	dec.UseNumber()
	var row desk.Row
	if err := dec.Decode(&row); err != nil {
		return nil, desk.Errorf(desk.EINVALID, "rows of workspaces are not valid NDJSON: %v", err)
	}
	var more desk.Row
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) || x.chunks["workspaces"] > 1 {
		return nil, desk.Errorf(desk.EINVALID, "the archive has more than one workspaces row")
	}
	return checkWorkspaceRow(x.s.home.Root, row)
}

func checkWorkspaceRow(home string, row desk.Row) (*settings, error) {
	str := func(col string) (string, error) {
		switch v := row[col].(type) {
		case nil:
			return "", nil
		case string:
			return v, nil
		}
		return "", desk.Errorf(desk.EINVALID, "the workspaces row's %s is %v, not a string", col, row[col])
	}
	flag := func(col string) (bool, error) {
		switch v := row[col].(type) {
		case nil:
			return false, nil
		case bool:
			return v, nil
		}
		return false, desk.Errorf(desk.EINVALID, "%s %v must be true or false", col, row[col])
	}
	st := &settings{}
	raw, err := str("host_paths")
	if err != nil {
		return nil, err
	}
	var hps []desk.HostPath
	if strings.TrimSpace(raw) != "" {
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&hps); err != nil {
			return nil, desk.Errorf(desk.EINVALID, "host_paths of the workspaces row is not a list of host paths: %v", err)
		}
	}
	// What another host recorded about its directories means nothing
	// here: the identities are taken again, as a PATCH would.
	for i := range hps {
		hps[i].Dev, hps[i].Ino = 0, 0
	}
	if hps, err = hostpath.Check(home, hps); err != nil {
		return nil, err
	}
	st.hostPaths = encodeHostPaths(hps)
	root, err := str("primary_root")
	if err != nil {
		return nil, err
	}
	if st.primaryRoot, err = hostpath.CheckPrimaryRoot(root, hps); err != nil {
		return nil, err
	}
	if st.agent.ApprovalMode, err = str("approval_mode"); err != nil {
		return nil, err
	}
	if st.agent.ApprovalMode == "" {
		st.agent.ApprovalMode = desk.ApprovalModeUser
	}
	if err := desk.CheckApprovalMode(st.agent.ApprovalMode); err != nil {
		return nil, err
	}
	if st.agent.Network, err = flag("network"); err != nil {
		return nil, err
	}
	if st.agent.BlockingInput, err = flag("blocking_input"); err != nil {
		return nil, err
	}
	switch v := row["token_budget"].(type) {
	case nil:
	case json.Number:
		n, err := v.Int64()
		if err != nil {
			return nil, desk.Errorf(desk.EINVALID, "token_budget %s must be a whole number of tokens (0 or null for no budget)", v)
		}
		if err := desk.CheckTokenBudget(n); err != nil {
			return nil, err
		}
		st.agent.TokenBudget = n
	default:
		return nil, desk.Errorf(desk.EINVALID, "token_budget %v must be a whole number of tokens (0 or null for no budget)", v)
	}
	limits, err := str("sandbox_limits")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(limits) != "" {
		dec := json.NewDecoder(strings.NewReader(limits))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&st.agent.Sandbox); err != nil {
			return nil, desk.Errorf(desk.EINVALID, "sandbox_limits of the workspaces row are not sandbox limits: %v", err)
		}
		if err := desk.CheckSandboxLimits(st.agent.Sandbox); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// apply writes the checked settings into the row that is inserted.
func (st *settings) apply(row desk.Row) {
	row["host_paths"] = st.hostPaths
	row["primary_root"] = st.primaryRoot
	row["approval_mode"] = st.agent.ApprovalMode
	row["network"] = st.agent.Network
	row["blocking_input"] = st.agent.BlockingInput
	if _, ok := row["token_budget"]; ok {
		row["token_budget"] = json.Number(fmt.Sprint(st.agent.TokenBudget))
	}
	// sandbox_limits stays as the archive has it: checked whole, with no
	// unknown field, so it is what the store would read.
}

// encodeHostPaths is the stores' encoding of host paths (json.Marshal of
// the list), "[]" for none.
func encodeHostPaths(hps []desk.HostPath) string {
	if len(hps) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(hps) // plain strings and numbers: cannot fail
	return string(b)
}

// exportRow leaves out of an exported row what only this host means: the
// device and inode recorded for each host path (an import records its
// own), so an export is the same bytes wherever the directories live.
func exportRow(table string, r desk.Row) (desk.Row, error) {
	if table != "workspaces" {
		return r, nil
	}
	raw, ok := r["host_paths"].(string)
	if !ok || raw == "" || raw == "[]" {
		return r, nil
	}
	var hps []desk.HostPath
	if err := json.Unmarshal([]byte(raw), &hps); err != nil {
		return nil, fmt.Errorf("export: host paths of the workspace: %w", err)
	}
	for i := range hps {
		hps[i].Dev, hps[i].Ino = 0, 0
	}
	out := make(desk.Row, len(r))
	for k, v := range r {
		out[k] = v
	}
	out["host_paths"] = encodeHostPaths(hps)
	return out, nil
}
