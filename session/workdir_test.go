package session

import (
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/fsjail"
	"github.com/desk-runtime/desk/hostpath"
	"github.com/desk-runtime/desk/layout"
)

// TestWorkDir is the table of INV-IO-03: explicit cwd > primary root >
// scratch > artifact directory, with the primary root defaulting to the
// first host path.
func TestWorkDir(t *testing.T) {
	home := layout.Home{Root: t.TempDir()}
	x := &desk.Session{ID: "ses_1", WorkspaceID: "ws_1", Actor: "act_1"}
	hp := []desk.HostPath{{Path: "/srv/data", Mode: desk.HostPathRO}, {Path: "/home/me/proj", Mode: desk.HostPathRW}}
	cases := []struct {
		name      string
		ws        desk.Workspace
		execution string
		explicit  string
		want      string
		code      string
	}{
		{name: "nothing declared, no execution", want: "/artifacts"},
		{name: "nothing declared, in an execution", execution: "exe_1", want: "/scratch"},
		{name: "first host path is the primary root", ws: desk.Workspace{HostPaths: hp}, execution: "exe_1", want: "/srv/data"},
		{name: "declared primary root wins over host paths", ws: desk.Workspace{HostPaths: hp, PrimaryRoot: "/home/me/proj/src"}, execution: "exe_1", want: "/home/me/proj/src"},
		{name: "primary root in the artifacts", ws: desk.Workspace{PrimaryRoot: "/artifacts/out"}, execution: "exe_1", want: "/artifacts/out"},
		{name: "explicit wins", ws: desk.Workspace{HostPaths: hp}, execution: "exe_1", explicit: "/scratch/build", want: "/scratch/build"},
		{name: "explicit relative to the primary root", ws: desk.Workspace{HostPaths: hp, PrimaryRoot: "/home/me/proj"}, explicit: "src/cmd", want: "/home/me/proj/src/cmd"},
		{name: "explicit relative to scratch", execution: "exe_1", explicit: "tmp", want: "/scratch/tmp"},
		{name: "explicit outside the guest", explicit: "/etc", code: desk.EFORBIDDEN},
		{name: "explicit climbing out", ws: desk.Workspace{HostPaths: hp}, explicit: "../../etc", code: desk.EFORBIDDEN},
		{name: "scratch is not there outside an execution", explicit: "/scratch", code: desk.EFORBIDDEN},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := View{Session: x, Execution: c.execution, HostPaths: c.ws.HostPaths}
			j, err := fsjail.New(Mounts(home, v))
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			got, err := WorkDir(j, &c.ws, v, c.explicit)
			if desk.ErrorCode(err) != c.code || got != c.want {
				t.Fatalf("WorkDir = %q, %v; want %q, code %q", got, err, c.want, c.code)
			}
		})
	}
}

// TestHostPathMounts: host paths are mounted at their own path, read-only
// unless declared rw; writes land only in rw mounts (INV-IO-02).
func TestHostPathMounts(t *testing.T) {
	home := layout.Home{Root: t.TempDir()}
	ro, rw := t.TempDir(), t.TempDir()
	x := &desk.Session{ID: "ses_1", WorkspaceID: "ws_1", Actor: "act_1"}
	declared := []desk.HostPath{{Path: ro, Mode: desk.HostPathRO}, {Path: rw, Mode: desk.HostPathRW}}
	// Undeclared identities (rows from before desk recorded them) are
	// refused: the jail cannot tell the directory is still the one meant.
	unpinned, err := fsjail.New(Mounts(home, View{Session: x, HostPaths: declared}))
	if err != nil {
		t.Fatal(err)
	}
	defer unpinned.Close()
	if _, err := unpinned.Stat(rw); !desk.IsCode(err, desk.EFORBIDDEN) {
		t.Fatalf("a host path without a recorded identity: %v", err)
	}
	checked, err := hostpath.Check(home.Root, declared)
	if err != nil {
		t.Fatal(err)
	}
	v := View{Session: x, Execution: "exe_1", HostPaths: checked}
	j, err := fsjail.New(Mounts(home, v))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, _, err := j.Writable(ro + "/x"); !desk.IsCode(err, desk.EFORBIDDEN) {
		t.Fatalf("write to a read-only host path: %v", err)
	}
	if _, _, err := j.Writable(rw + "/x"); err != nil {
		t.Fatalf("write to a rw host path: %v", err)
	}
	if _, err := j.Resolve("/srv/undeclared"); !desk.IsCode(err, desk.EFORBIDDEN) {
		t.Fatalf("an undeclared host path resolves: %v", err)
	}
	if PrimaryRoot(nil) != "" || PrimaryRoot(&desk.Workspace{HostPaths: v.HostPaths}) != ro {
		t.Fatalf("PrimaryRoot")
	}
}
