package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/classify"
	"github.com/desk-runtime/desk/layout"
)

type inspectArgs struct {
	View    string `json:"view" jsonschema:"enum=groups,enum=group,enum=item,enum=artifacts" jsonschema_description:"what to look at"`
	GroupID string `json:"group_id,omitempty" jsonschema_description:"group: the bound group's id"`
	ItemID  string `json:"item_id,omitempty" jsonschema_description:"item: the item's id"`
	Offset  int    `json:"offset,omitempty" jsonschema:"minimum=0" jsonschema_description:"group, artifacts: how many entries to skip; default 0"`
	Limit   int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=100" jsonschema_description:"group, artifacts: how many entries to show; default 20"`
}

type inspect struct{ args[inspectArgs] }

func (inspect) Name() string { return "inspect" }
func (inspect) Description() string {
	return "Look at the session's ambient context and artifacts when you need evidence: view \"groups\" lists the bound selection groups; \"group\" pages through one group's items; \"item\" reads one item; \"artifacts\" pages through the session's artifacts (names and ids, never bodies). Items you inspect stay available until this turn ends."
}
func (inspect) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t inspect) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	switch {
	case a.View == "group" && a.GroupID == "":
		return badArg("group_id", "required, missing: view group needs a group_id; view groups lists them"), nil
	case a.View == "item" && a.ItemID == "":
		return badArg("item_id", "required, missing: view item needs an item_id; view group lists them"), nil
	}
	if a.Limit == 0 {
		a.Limit = 20
	}
	bound, err := env.Store.ListBindings(ctx, env.Session.ID)
	if err != nil {
		return nil, err
	}
	isBound := func(id string) bool {
		for _, g := range bound {
			if g.ID == id {
				return true
			}
		}
		return false
	}
	switch a.View {
	case "groups":
		out := make([]map[string]any, 0, len(bound))
		lines := make([]string, 0, len(bound))
		for _, g := range bound {
			out = append(out, map[string]any{"id": g.ID, "name": g.Name, "item_count": g.ItemCount})
			lines = append(lines, fmt.Sprintf("%s  %s  (%d items)", g.ID, g.Name, g.ItemCount))
		}
		return &Result{Value: map[string]any{"groups": out}, Facts: map[string]any{"view": "groups", "groups": len(out)},
			Output: listing("bound groups", lines)}, nil
	case "group":
		if !isBound(a.GroupID) {
			return Fail(CodeNotFound, "group %q is not bound to this session; inspect view groups lists the bound ones", a.GroupID), nil
		}
		items, err := env.Store.ListGroupItems(ctx, a.GroupID)
		if err != nil {
			return nil, err
		}
		page := pageOf(items, a.Offset, a.Limit)
		out := make([]map[string]any, 0, len(page))
		lines := make([]string, 0, len(page))
		for _, it := range page {
			// What the model saw stays available for the rest of the
			// turn, even if someone removes it from the group (S-N).
			if err := env.Store.LeaseItem(ctx, it.ID, env.Execution.ID); err != nil {
				return nil, err
			}
			out = append(out, itemSummary(it))
			lines = append(lines, fmt.Sprintf("%s  %s  %s  %d B", it.ID, it.Name, it.Kind, it.Size))
		}
		return &Result{Value: map[string]any{"group_id": a.GroupID, "total": len(items), "offset": a.Offset, "items": out},
			Facts:  map[string]any{"view": "group", "group_id": a.GroupID, "items": len(out), "leased": len(out)},
			Output: listing(fmt.Sprintf("items %d-%d of %d in %s", min(a.Offset+1, len(items)), a.Offset+len(page), len(items), a.GroupID), lines)}, nil
	case "item":
		it, err := env.Store.GetItem(ctx, a.ItemID)
		if err != nil || it.WorkspaceID != env.Session.WorkspaceID {
			return Fail(CodeNotFound, "item %q does not exist", a.ItemID), nil
		}
		reachable, err := itemReachable(ctx, env, it.ID, bound)
		if err != nil {
			return nil, err
		}
		if !reachable {
			return Fail(CodeNotFound, "item %q is not in a group of this session", a.ItemID), nil
		}
		if err := env.Store.LeaseItem(ctx, it.ID, env.Execution.ID); err != nil {
			return nil, err
		}
		v := itemSummary(it)
		text, note, err := itemText(env, it)
		if err != nil {
			return nil, err
		}
		v["text"], v["note"] = text, note
		out := text
		if out == "" {
			out = fmt.Sprintf("%s  %s  %s  %d B", it.ID, it.Name, it.Kind, it.Size)
			if note != "" {
				out += "\n" + note
			}
		}
		return &Result{Value: v, Facts: map[string]any{"view": "item", "item_id": it.ID, "leased": 1}, Output: out}, nil
	case "artifacts":
		arts, err := env.Store.ListArtifacts(ctx, env.Session.ID)
		if err != nil {
			return nil, err
		}
		page := pageOf(arts, a.Offset, a.Limit)
		out := make([]map[string]any, 0, len(page))
		lines := make([]string, 0, len(page))
		for _, x := range page {
			out = append(out, map[string]any{"id": x.ID, "name": x.Name, "path": x.Path, "kind": x.Kind, "size": x.Size, "immutable": x.Immutable})
			lines = append(lines, fmt.Sprintf("%s  %s  %s  %d B", x.ID, x.Name, x.Kind, x.Size))
		}
		return &Result{Value: map[string]any{"total": len(arts), "offset": a.Offset, "artifacts": out},
			Facts:  map[string]any{"view": "artifacts", "artifacts": len(out)},
			Output: listing(fmt.Sprintf("artifacts %d-%d of %d", min(a.Offset+1, len(arts)), a.Offset+len(page), len(arts)), lines)}, nil
	}
	return badArg("view", "got %q, want one of groups, group, item, artifacts", a.View), nil
}

// itemReachable: an item of a bound group, or one this execution already
// leased (it may have been removed from its group since).
func itemReachable(ctx context.Context, env *Env, itemID string, bound []*desk.Group) (bool, error) {
	for _, g := range bound {
		items, err := env.Store.ListGroupItems(ctx, g.ID)
		if err != nil {
			return false, err
		}
		for _, it := range items {
			if it.ID == itemID {
				return true, nil
			}
		}
	}
	return env.Store.HasLease(ctx, itemID, env.Execution.ID)
}

// listing is the command record's output of a listing view: what the
// call looked at, one entry a line, so the transcript's span shows it
// (the model's JSON result is kept apart, in the record's result).
func listing(head string, lines []string) string {
	if len(lines) == 0 {
		return head + ": none"
	}
	return head + ":\n" + strings.Join(lines, "\n")
}

func pageOf[T any](xs []T, offset, limit int) []T {
	if offset >= len(xs) {
		return nil
	}
	end := min(len(xs), offset+limit)
	return xs[offset:end]
}

func itemSummary(it *desk.Item) map[string]any {
	v := map[string]any{"id": it.ID, "kind": it.Kind, "name": it.Name, "size": it.Size, "media_type": it.MediaType}
	if it.URL != "" {
		v["url"] = it.URL
	}
	if it.Title != "" {
		v["title"] = it.Title
	}
	return v
}

// itemText returns an item's text, bounded, or a note saying why not.
func itemText(env *Env, it *desk.Item) (string, string, error) {
	f, err := os.Open(env.Home.Abs(it.WorkspaceID, layout.ItemRel(it.ID)))
	if err != nil {
		return "", "the item's bytes are missing", nil
	}
	defer f.Close()
	class, err := classify.Classify(it.Name, it.MediaType, f, it.Size)
	if err != nil {
		return "", "", err
	}
	if !class.Text {
		return "", "this item is " + classify.Describe(class.Kind) + "; it is not shown as text", nil
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRead))
	if err != nil {
		return "", "", err
	}
	for !utf8.Valid(b) {
		b = b[:len(b)-1]
	}
	note := ""
	if it.Size > maxRead {
		note = "truncated"
	}
	return string(b), note, nil
}
