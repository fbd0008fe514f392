package web

import "github.com/desk-runtime/desk"

// minSuffix is how many trailing characters of an id a label shows at
// least: enough to tell workspaces apart at a glance.
const minSuffix = 3

// idSuffixes tells apart workspaces that share a name (created with
// allow_duplicate_name, or from before names were checked): for each id
// whose name another listed workspace also has, the shortest tail of the
// id, at least minSuffix characters, that no other workspace of that name
// ends with, as "…v7a". Ids of uniquely named workspaces are absent.
func idSuffixes(names, ids []string) map[string]string {
	byName := map[string][]string{}
	for i, n := range names {
		byName[n] = append(byName[n], ids[i])
	}
	var out map[string]string
	for _, group := range byName {
		if len(group) < 2 {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		for _, id := range group {
			n := min(minSuffix, len(id))
			for ; n < len(id); n++ {
				if uniqueTail(id, group, n) {
					break
				}
			}
			out[id] = "…" + id[len(id)-n:]
		}
	}
	return out
}

// uniqueTail reports whether no other id of group ends with id's last n
// characters.
func uniqueTail(id string, group []string, n int) bool {
	tail := id[len(id)-n:]
	for _, o := range group {
		if o != id && len(o) >= n && o[len(o)-n:] == tail {
			return false
		}
	}
	return true
}

func workspaceSuffixes(wss []*desk.Workspace) map[string]string {
	names, ids := make([]string, len(wss)), make([]string, len(wss))
	for i, w := range wss {
		names[i], ids[i] = w.Name, w.ID
	}
	return idSuffixes(names, ids)
}

func catalogSuffixes(es []*desk.CatalogEntry) map[string]string {
	names, ids := make([]string, len(es)), make([]string, len(es))
	for i, e := range es {
		names[i], ids[i] = e.Name, e.WorkspaceID
	}
	return idSuffixes(names, ids)
}
