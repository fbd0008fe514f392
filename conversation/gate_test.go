package conversation_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/archive"
	"github.com/desk-runtime/desk/conversation"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/store/sqlite"
)

// wait bounds every wait: generous, the machine may be loaded.
const wait = 30 * time.Second

// fixture is one session in a real store; turns are executions of it.
type fixture struct {
	store desk.Store
	sess  *desk.Session
	arch  *recorder
}

// recorder keeps the archive records the service writes.
type recorder struct {
	mu   sync.Mutex
	recs []archive.Record
}

func (r *recorder) Append(_ context.Context, _ string, rec archive.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.recs)
}

func setup(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.OpenWith(ctx, filepath.Join(t.TempDir(), "desk.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := desk.Now()
	w := &desk.Workspace{ID: desk.NewID(desk.PrefixWorkspace), Name: "w", State: desk.WorkspaceActive, CreatedAt: now, UpdatedAt: now}
	a := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w.ID, Name: desk.OwnerActorName, Kind: desk.ActorHuman, CreatedAt: now}
	must(t, st.CreateWorkspace(ctx, w, a, true))
	x := &desk.Session{ID: desk.NewID(desk.PrefixSession), Signature: desk.NewSignature(), WorkspaceID: w.ID, Actor: a.ID,
		Lifecycle: desk.SessionActive, CreatedAt: now, UpdatedAt: now}
	must(t, st.CreateSession(ctx, x))
	x, err = st.GetSession(ctx, x.ID)
	must(t, err)
	return &fixture{store: st, sess: x, arch: &recorder{}}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) service() *conversation.Service {
	return conversation.New(f.store, conversation.Options{Archive: f.arch})
}

// turn is a turn of execution exe; closing says whether desk shuts down.
func (f *fixture) turn(exe string, resumed bool, closing func() bool) *execution.Turn {
	if closing == nil {
		closing = func() bool { return false }
	}
	return &execution.Turn{Session: f.sess, Execution: &desk.Execution{ID: exe, SessionID: f.sess.ID, SurfaceID: f.sess.SurfaceID, Owner: "me"},
		Item: &desk.QueueItem{Text: "go"}, Resumed: resumed, Closing: closing, Emit: func(string, any) {}}
}

// command records a gated call of exe.
func (f *fixture) command(t *testing.T, exe string) *desk.Command {
	t.Helper()
	c := &desk.Command{ID: desk.NewID("cmd"), ExecutionID: exe, SessionID: f.sess.ID, SurfaceID: f.sess.SurfaceID, CallID: "call-1",
		Tool: "exec_command", Arguments: json.RawMessage(`{"cmd":"rm -rf build"}`), Status: desk.CommandRequested, CreatedAt: desk.Now()}
	must(t, f.store.CreateCommand(context.Background(), c))
	return c
}

// pending is the one approval of the session, once it is pending.
func (f *fixture) pending(t *testing.T) *desk.Approval {
	t.Helper()
	var ap *desk.Approval
	testwait.Until(t, wait, func() bool {
		aps, err := f.store.ListApprovals(context.Background(), f.sess.ID, true)
		if err != nil || len(aps) == 0 {
			return false
		}
		ap = aps[0]
		return true
	}, "the approval request to be recorded")
	return ap
}

var admin = desk.WithPrincipal(context.Background(), desk.Principal{Admin: true})

type approveResult struct {
	ok  bool
	why string
	err error
}

func approveAsync(ctx context.Context, g *conversation.Gate, cmd *desk.Command) <-chan approveResult {
	out := make(chan approveResult, 1)
	go func() {
		ok, why, err := g.Approve(ctx, conversation.Approval{Command: cmd, Summary: "rm -rf build", Mode: desk.ApprovalModeUser})
		out <- approveResult{ok, why, err}
	}()
	return out
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// A decision a person takes while no desk process runs the turn (it
// suspended at shutdown) is found by the next process's gate, which
// neither asks again nor waits.
func TestDecisionBeforeRestartIsFound(t *testing.T) {
	t.Parallel()
	f := setup(t)
	exe := desk.NewID("exe")
	cmd := f.command(t, exe)

	// The first process asks, then shuts down while the person thinks.
	var closing sync.Once
	shut := make(chan struct{})
	isClosing := func() bool {
		select {
		case <-shut:
			return true
		default:
			return false
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := f.service()
	res := approveAsync(ctx, first.Gate(f.turn(exe, false, isClosing), conversation.GateOptions{Resumes: true}), cmd)
	ap := f.pending(t)
	closing.Do(func() { close(shut) })
	cancel()
	if r := receive(t, res, "the suspended approval"); !errors.Is(r.err, execution.ErrSuspended) {
		t.Fatalf("Approve at shutdown = %v, want execution.ErrSuspended", r.err)
	}
	if cur, err := f.store.GetApproval(context.Background(), ap.ID); err != nil || cur.Status != desk.ApprovalPending {
		t.Fatalf("a suspended wait must stay pending: %+v, %v", cur, err)
	}

	// The person decides between the two processes.
	if _, err := f.service().DecideApproval(admin, ap.ID, "approve", "fine"); err != nil {
		t.Fatal(err)
	}

	// The next process continues the turn: the decision stands.
	second := f.service()
	ok, why, err := second.Gate(f.turn(exe, true, nil), conversation.GateOptions{Resumes: true}).Approve(context.Background(),
		conversation.Approval{Command: cmd, Summary: "rm -rf build", Mode: desk.ApprovalModeUser})
	if err != nil || !ok || why != "fine" {
		t.Fatalf("resumed Approve = %v, %q, %v; want the decision taken before the restart (true, \"fine\")", ok, why, err)
	}
	aps, err := f.store.ListApprovals(context.Background(), f.sess.ID, false)
	must(t, err)
	if len(aps) != 1 {
		t.Fatalf("the resumed turn asked again: %d approvals", len(aps))
	}
}

// Ending the turn's context ends every kind of wait at once; a turn that
// does not suspend withdraws its approval and question, and says so in
// the archive.
func TestCancelEndsAwait(t *testing.T) {
	t.Parallel()
	f := setup(t)
	exe := desk.NewID("exe")
	s := f.service()
	g := s.Gate(f.turn(exe, false, nil), conversation.GateOptions{})

	t.Run("approve", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		res := approveAsync(ctx, g, f.command(t, exe))
		ap := f.pending(t)
		testwait.Until(t, wait, func() bool { return s.Waiting(ap.ID) }, "the gate to wait on the approval")
		before := f.arch.count()
		cancel()
		if r := receive(t, res, "the cancelled approval"); !errors.Is(r.err, context.Canceled) || r.ok {
			t.Fatalf("cancelled Approve = %v, %v; want false, context.Canceled", r.ok, r.err)
		}
		cur, err := f.store.GetApproval(context.Background(), ap.ID)
		must(t, err)
		if cur.Status != desk.ApprovalCancelled {
			t.Fatalf("an interrupted approval must be withdrawn, is %s", cur.Status)
		}
		if f.arch.count() != before+1 {
			t.Fatalf("the withdrawal was not archived")
		}
		if s.Waiting(ap.ID) {
			t.Fatal("the ended wait is still parked")
		}
	})
	t.Run("ask", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		type res struct {
			err error
		}
		out := make(chan res, 1)
		go func() {
			_, _, err := g.Ask(ctx, conversation.Question{CommandID: "cmd-ask", Blocking: true, Wait: time.Hour,
				Questions: []desk.InputQuestion{{ID: "q", Question: "which?", Default: "a"}}})
			out <- res{err}
		}()
		var r *desk.InputRequest
		testwait.Until(t, wait, func() bool {
			rs, _ := f.store.ListInputRequests(context.Background(), f.sess.ID)
			if len(rs) == 1 && s.Waiting(rs[0].ID) {
				r = rs[0]
				return true
			}
			return false
		}, "the question to be asked")
		cancel()
		if got := receive(t, out, "the cancelled question"); !errors.Is(got.err, context.Canceled) {
			t.Fatalf("cancelled Ask = %v, want context.Canceled", got.err)
		}
		cur, err := f.store.GetInputRequest(context.Background(), r.ID)
		must(t, err)
		if cur.Status != desk.InputCancelled {
			t.Fatalf("an interrupted question must be withdrawn, is %s", cur.Status)
		}
	})
	t.Run("propose", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		out := make(chan error, 1)
		go func() {
			_, err := g.Propose(ctx, "cmd-plan", json.RawMessage(`{"title":"p","steps":["a"]}`))
			out <- err
		}()
		testwait.Until(t, wait, func() bool {
			ps, _ := f.store.ListPlans(context.Background(), exe)
			return len(ps) == 1 && s.Waiting(ps[0].ID)
		}, "the plan card to be shown")
		cancel()
		if err := receive(t, out, "the cancelled plan card"); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Propose = %v, want context.Canceled", err)
		}
	})
}

// A decision through the doors reaches the waiting gate at once: the
// wait is woken, not left to its next poll; and the doors' answer to a
// blocking question is what Ask returns.
func TestDoorsWakeTheGate(t *testing.T) {
	t.Parallel()
	f := setup(t)
	exe := desk.NewID("exe")
	s := f.service()
	g := s.Gate(f.turn(exe, false, nil), conversation.GateOptions{Resumes: true})
	res := approveAsync(context.Background(), g, f.command(t, exe))
	ap := f.pending(t)
	testwait.Until(t, wait, func() bool { return s.Waiting(ap.ID) }, "the gate to wait on the approval")
	if _, err := s.DecideApproval(admin, ap.ID, "deny", ""); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, res, "the decided approval"); r.err != nil || r.ok || r.why != "by "+desk.AdminActor {
		t.Fatalf("denied Approve = %v, %q, %v; want false, \"by %s\"", r.ok, r.why, r.err, desk.AdminActor)
	}

	type answer struct {
		got       map[string]string
		defaulted bool
		err       error
	}
	out := make(chan answer, 1)
	go func() {
		got, def, err := g.Ask(context.Background(), conversation.Question{CommandID: "cmd-ask", Blocking: true, Wait: time.Hour,
			Questions: []desk.InputQuestion{{ID: "color", Question: "which colour?", Options: []desk.InputOption{{Label: "Red", Recommended: true}, {Label: "Blue"}}}}})
		out <- answer{got, def, err}
	}()
	var r *desk.InputRequest
	testwait.Until(t, wait, func() bool {
		rs, _ := f.store.ListInputRequests(context.Background(), f.sess.ID)
		if len(rs) == 1 && s.Waiting(rs[0].ID) {
			r = rs[0]
			return true
		}
		return false
	}, "the question to be asked")
	if _, _, err := s.AnswerInput(admin, r.ID, map[string]string{"color": " blue "}); err != nil {
		t.Fatal(err)
	}
	if a := receive(t, out, "the answered question"); a.err != nil || a.defaulted || a.got["color"] != "Blue" {
		t.Fatalf("answered Ask = %v, %v, %v; want the person's answer, the option's label Blue", a.got, a.defaulted, a.err)
	}
}

// Auto-review records the executor's reviewer's verdict as a decided
// approval, requested and resolved in the archive, and a resumed turn
// keeps the verdict instead of reviewing again.
func TestAutoReviewVerdictStands(t *testing.T) {
	t.Parallel()
	f := setup(t)
	exe := desk.NewID("exe")
	cmd := f.command(t, exe)
	reviews := 0
	review := func() (bool, string) { reviews++; return reviews == 1, "reviewed" }
	a := conversation.Approval{Command: cmd, Summary: "ls", Mode: desk.ApprovalModeAutoReview, Review: review}
	ok, why, err := f.service().Gate(f.turn(exe, false, nil), conversation.GateOptions{}).Approve(context.Background(), a)
	if err != nil || !ok || why != "reviewed" {
		t.Fatalf("auto-review = %v, %q, %v", ok, why, err)
	}
	if f.arch.count() != 2 {
		t.Fatalf("auto-review archived %d records, want requested and resolved", f.arch.count())
	}
	ok, _, err = f.service().Gate(f.turn(exe, true, nil), conversation.GateOptions{Resumes: true}).Approve(context.Background(), a)
	if err != nil || !ok || reviews != 1 {
		t.Fatalf("resumed auto-review = %v, %v after %d reviews; want the first verdict, reviewed once", ok, err, reviews)
	}
}

// A runtime's own options reach the person and back: an unknown option
// is refused naming the ones there are, the chosen option is what the
// gate returns, and an allow_always answer stands for the same command
// for the rest of the session (no new request), but not for another.
func TestGateOptionsAndStandingAnswers(t *testing.T) {
	t.Parallel()
	f := setup(t)
	exe := desk.NewID("exe")
	s := f.service()
	g := s.Gate(f.turn(exe, false, nil), conversation.GateOptions{})
	codex := []desk.ApprovalOption{
		{ID: "accept", Kind: desk.OptionAllowOnce, Label: "Allow once"},
		{ID: "acceptForSession", Kind: desk.OptionAllowAlways, Label: "Allow for this session"},
		{ID: "decline", Kind: desk.OptionRejectOnce, Label: "Decline"},
	}
	ask := func(cmd *desk.Command, what string) <-chan conversation.Verdict {
		out := make(chan conversation.Verdict, 1)
		go func() {
			v, err := g.Decide(context.Background(), conversation.Approval{Command: cmd, Summary: what, Mode: desk.ApprovalModeUser,
				Request: desk.ApprovalRequest{What: what, Cwd: "/workspace", Why: "it writes", Options: codex}})
			if err != nil {
				t.Error(err)
			}
			out <- v
		}()
		return out
	}
	res := ask(f.command(t, exe), "rm -rf build")
	ap := f.pending(t)
	shown, err := s.Approvals(admin, f.sess.ID, true)
	must(t, err)
	if len(shown) != 1 || shown[0].What != "rm -rf build" || shown[0].Cwd != "/workspace" || len(shown[0].Options) != 3 {
		t.Fatalf("the approval as the doors show it: %+v", shown)
	}
	if _, err := s.DecideApproval(admin, ap.ID, "yolo", ""); !desk.IsCode(err, desk.EINVALID) || !strings.Contains(err.Error(), "acceptForSession") {
		t.Fatalf("an option the runtime did not offer: %v", err)
	}
	if cur, _ := f.store.GetApproval(context.Background(), ap.ID); cur.Status != desk.ApprovalPending {
		t.Fatalf("a refused answer changed the approval: %+v", cur)
	}
	dec, err := s.DecideApproval(admin, ap.ID, "acceptForSession", "")
	must(t, err)
	if dec.Status != desk.ApprovalApproved || dec.OptionID != "acceptForSession" {
		t.Fatalf("decided %+v", dec)
	}
	if v := receive(t, res, "the verdict"); !v.Allowed || v.Option.ID != "acceptForSession" {
		t.Fatalf("verdict %+v", v)
	}
	// The same command again: answered from the standing answer, unasked.
	v := receive(t, ask(f.command(t, exe), "rm -rf build"), "the standing verdict")
	if !v.Allowed || v.Option.Kind == "" {
		t.Fatalf("standing verdict %+v", v)
	}
	if all, _ := f.store.ListApprovals(context.Background(), f.sess.ID, false); len(all) != 1 {
		t.Fatalf("the same command asked again: %d approvals", len(all))
	}
	// Another command is asked; "approve" picks the once option.
	res = ask(f.command(t, exe), "rm -rf dist")
	var next *desk.Approval
	testwait.Until(t, wait, func() bool {
		aps, _ := f.store.ListApprovals(context.Background(), f.sess.ID, true)
		if len(aps) == 1 {
			next = aps[0]
		}
		return next != nil
	}, "the other command's approval")
	dec, err = s.DecideApproval(admin, next.ID, "approve", "")
	must(t, err)
	if v := receive(t, res, "the other verdict"); !v.Allowed || v.Option.ID != "accept" || dec.OptionID != "accept" {
		t.Fatalf("approve chose %+v (%s)", v.Option, dec.OptionID)
	}
}
