package execution

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/hostid"
)

// A desk in another container on the same machine has the same hostname
// and boot but its own PID namespace: its pid means nothing here, so its
// liveness is its heartbeat, never "no such pid".
func TestOwnerInAnotherPIDNamespaceIsJudgedByHeartbeat(t *testing.T) {
	t.Parallel()
	host := hostid.Identity()
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Skipf("no /proc/self/ns/pid here: %v", err)
	}
	if !strings.HasSuffix(host, "/"+ns) {
		t.Fatalf("host identity %q does not name the PID namespace %s", host, ns)
	}
	now := time.Now()
	s := &Service{host: host, owner: &desk.Owner{ID: "own_self"}, opts: Options{OwnerTTL: 15 * time.Second}}
	const gone = 1 << 22 // above pid_max's default: no process has it
	sameBoot := strings.TrimSuffix(host, ns)
	peer := &desk.Owner{ID: "own_peer", PID: gone, Host: sameBoot + "pid:[1]", HeartbeatAt: now}
	if s.dead(peer, now) {
		t.Fatal("a live peer in another PID namespace was judged dead by its pid")
	}
	if !s.dead(peer, now.Add(16*time.Second)) {
		t.Fatal("a peer past its heartbeats was judged alive")
	}
	local := &desk.Owner{ID: "own_local", PID: gone, Host: host, HeartbeatAt: now}
	if !s.dead(local, now) {
		t.Fatal("a gone process of this very namespace was judged alive")
	}
}
