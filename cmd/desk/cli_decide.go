package main

// The decisions a turn waits on, from the command line: approvals of gated
// tool calls (desk approve / deny), answers to the agent's questions (desk
// answer) and plan cards (desk plan approve|decline|revise), with the lists
// that find them (desk approvals ls, desk inputs ls).

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
)

func decideCommands(g *globals) []*cobra.Command {
	return []*cobra.Command{approvalsCmd(g), decideApprovalCmd(g, "approve"), decideApprovalCmd(g, "deny"),
		inputsCmd(g), answerCmd(g), planCmd(g)}
}

// checkKind refuses an id of another kind of decision with the command
// that does take it, so "desk approve inp_…" teaches rather than fails.
func checkKind(id, want string) error {
	kind, _, ok := strings.Cut(id, "_")
	if !ok || kind == want {
		return nil // the server judges ids of no known shape
	}
	switch kind {
	case "apr":
		return usagef("%s is an approval: decide it with desk approve %s or desk deny %s", id, id, id)
	case "inp":
		return usagef("%s is a question: answer it with desk answer %s key=value", id, id)
	case "pln":
		return usagef("%s is a plan card: decide it with desk plan approve|decline|revise %s", id, id)
	}
	return nil
}

func approvalsCmd(g *globals) *cobra.Command {
	cmd := noun("approvals", "List the approval requests of a session's gated tool calls", "approval")
	var all bool
	ls := &cobra.Command{
		Use:     "ls SES",
		Aliases: []string{"list"},
		Short:   "List approval requests waiting for a decision (--all adds decided ones)",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			as, err := c.Approvals(cmd.Context(), a[0], !all)
			if err != nil {
				return err
			}
			return out(cmd, g, nonNilList(as), func(w io.Writer) {
				if len(as) == 0 && !all {
					fmt.Fprintf(w, "no approval waits in session %s\n", a[0])
					return
				}
				t := newTable(w, "ID", "STATUS", "TOOL", "EXECUTION", "CREATED", "WHAT")
				for _, x := range as {
					t.row(x.ID, x.Status, x.Tool, x.ExecutionID, fmtTime(x.CreatedAt), clip(approvalWhat(x), 80))
				}
				t.flush()
				// What each pending request asks, in full, and its options.
				for _, x := range as {
					if x.Status == desk.ApprovalPending {
						fmt.Fprintf(w, "\n%s", approvalCard(x))
					}
				}
			})
		},
	}
	ls.Flags().BoolVar(&all, "all", false, "include approved, denied and withdrawn requests")
	cmd.AddCommand(ls)
	return cmd
}

// approvalWhat is what an approval asks, as a person reads it.
func approvalWhat(a *desk.Approval) string {
	if a.What != "" {
		return a.What
	}
	return a.Summary
}

// approvalCard is a pending approval in full: what, where, why, the diff
// of an edit, and every option with the command that chooses it.
func approvalCard(a *desk.Approval) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s: %s\n", a.ID, a.Tool, approvalWhat(a))
	if a.Cwd != "" {
		fmt.Fprintf(&b, "  in:  %s\n", a.Cwd)
	}
	if a.Why != "" {
		fmt.Fprintf(&b, "  why: %s\n", a.Why)
	}
	if a.Diff != "" {
		for _, l := range strings.Split(strings.TrimSuffix(a.Diff, "\n"), "\n") {
			fmt.Fprintf(&b, "  | %s\n", l)
		}
	}
	for _, o := range a.Options {
		fmt.Fprintf(&b, "  %-13s %-28s desk approve %s --option %s\n", o.Kind, o.Label, a.ID, o.ID)
	}
	return b.String()
}

// decideApprovalCmd is desk approve or desk deny.
func decideApprovalCmd(g *globals, decision string) *cobra.Command {
	var reason, option string
	short := "Approve a gated tool call: the waiting turn runs it and goes on"
	if decision == "deny" {
		short = "Deny a gated tool call: the turn gets the refusal (and the reason) and goes on"
	}
	cmd := &cobra.Command{
		Use:   decision + " APR",
		Short: short,
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := checkKind(a[0], "apr"); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			choice := decision
			if option != "" {
				choice = option
			}
			x, err := c.DecideApproval(cmd.Context(), a[0], choice, reason)
			if err != nil {
				return err
			}
			return out(cmd, g, x, func(w io.Writer) {
				how := ""
				for _, o := range x.Options {
					if o.ID == x.OptionID && o.ID != decision {
						how = " (" + o.Label + ")"
					}
				}
				fmt.Fprintf(w, "%s%s %s: %s %s\n", x.Status, how, x.ID, x.Tool, backticked(approvalWhat(x)))
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why; recorded with the decision and, for a denial, told to the agent")
	if decision == "approve" {
		cmd.Flags().StringVar(&option, "option", "", "the id of the option to choose (desk approvals ls shows each request's options, such as allow for this session)")
	}
	return cmd
}

func inputsCmd(g *globals) *cobra.Command {
	cmd := noun("inputs", "List the questions the agent asked in a session", "input")
	var all bool
	ls := &cobra.Command{
		Use:     "ls SES",
		Aliases: []string{"list"},
		Short:   "List questions waiting for an answer, with their ids, options and defaults (--all adds settled ones)",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			rs, err := c.InputRequests(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			shown := []*desk.InputRequest{}
			for _, r := range rs {
				if all || r.Status == desk.InputPending {
					shown = append(shown, r)
				}
			}
			return out(cmd, g, shown, func(w io.Writer) {
				if len(shown) == 0 {
					fmt.Fprintf(w, "no question waits in session %s\n", a[0])
					return
				}
				for i, r := range shown {
					if i > 0 {
						fmt.Fprintln(w)
					}
					printInputRequest(w, r)
				}
			})
		},
	}
	ls.Flags().BoolVar(&all, "all", false, "include answered, defaulted and cancelled questions")
	cmd.AddCommand(ls)
	return cmd
}

// printInputRequest shows a request the way a person answers it: each
// question under its id, the options with the recommended one marked.
func printInputRequest(w io.Writer, r *desk.InputRequest) {
	mode := "the turn waits for the answer"
	if !r.Blocking {
		mode = "the turn went on with the defaults; an answer becomes a new message"
	}
	if r.Status != desk.InputPending {
		mode = r.Status
	}
	fmt.Fprintf(w, "%s (%s; execution %s)\n", r.ID, mode, r.ExecutionID)
	for _, q := range r.Questions {
		fmt.Fprintf(w, "  %s: %s\n", q.ID, q.Question)
		if len(q.Options) > 0 {
			var opts []string
			for _, o := range q.Options {
				l := fmt.Sprintf("%q", o.Label)
				if o.Recommended {
					l += " (recommended)"
				}
				opts = append(opts, l)
			}
			fmt.Fprintf(w, "      options: %s\n", strings.Join(opts, ", "))
		} else if q.Default != "" {
			fmt.Fprintf(w, "      default: %q\n", q.Default)
		}
		if ans, ok := r.Answers[q.ID]; ok {
			fmt.Fprintf(w, "      answer: %q\n", ans)
		}
	}
	if r.Status == desk.InputPending {
		fmt.Fprintf(w, "  answer with: %s\n", answerHint(r))
	}
}

// answerHint is the desk answer command line for a request, with each
// question's recommended option or default filled in.
func answerHint(r *desk.InputRequest) string {
	parts := []string{"desk answer", r.ID}
	for _, q := range r.Questions {
		v := q.Default
		for _, o := range q.Options {
			if o.Recommended {
				v = o.Label
			}
		}
		if v == "" {
			v = "…"
		}
		parts = append(parts, shellWord(q.ID+"="+v))
	}
	return strings.Join(parts, " ")
}

// shellWord quotes s for a POSIX shell when it needs quoting.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.=/:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func answerCmd(g *globals) *cobra.Command {
	var answersJSON string
	cmd := &cobra.Command{
		Use:   "answer INP [ID=ANSWER...]",
		Short: "Answer the agent's questions: one ID=ANSWER per question (desk inputs ls shows the ids)",
		Long: `Answer an input request. Each argument is QUESTION_ID=ANSWER; the answer may
be one of the question's option labels or your own words. Questions left out
keep their default (the recommended option). --answers takes the same as a
JSON object instead, {"q1":"…","q2":"…"} ("-" reads it from stdin); a single
argument that is a JSON object is read the same way. A question id the
request does not have is refused (exit 3) naming it and the ids it has.

A blocking question's waiting turn goes on with the answers; a non-blocking
one's answers are queued as a new message to the agent.`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := checkKind(a[0], "inp"); err != nil {
				return err
			}
			answers, err := parseAnswers(cmd, answersJSON, a[1:])
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.AnswerInput(cmd.Context(), a[0], answers)
			if err != nil {
				return err
			}
			return out(cmd, g, res, func(w io.Writer) {
				r := res.InputRequest
				var kv []string
				for _, q := range r.Questions {
					kv = append(kv, fmt.Sprintf("%s=%q", q.ID, r.Answers[q.ID]))
				}
				fmt.Fprintf(w, "answered %s: %s\n", r.ID, strings.Join(kv, " "))
				if res.QueuedItem != nil {
					fmt.Fprintf(w, "queued %s: the answers go to the agent as a new message\n", res.QueuedItem.ID)
				}
			})
		},
	}
	cmd.Flags().StringVar(&answersJSON, "answers", "", `the answers as a JSON object {"ID":"ANSWER",…}, or - to read it from stdin`)
	return cmd
}

// parseAnswers reads ID=ANSWER arguments, or one JSON object from
// --answers (or as the only argument). Malformed input is a usage error
// naming what was wrong; which ids exist is the server's to say.
func parseAnswers(cmd *cobra.Command, answersJSON string, args []string) (map[string]string, error) {
	if len(args) == 1 && strings.HasPrefix(strings.TrimSpace(args[0]), "{") {
		answersJSON, args = args[0], nil
	}
	if answersJSON != "" {
		if len(args) > 0 {
			return nil, usagef("give the answers as ID=ANSWER arguments or as --answers JSON, not both")
		}
		b := []byte(answersJSON)
		if answersJSON == "-" {
			var err error
			if b, err = io.ReadAll(cmd.InOrStdin()); err != nil {
				return nil, usagef("--answers -: %v", err)
			}
		}
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, usagef(`the answers must be a JSON object of strings, {"q1":"…"}: %v`, err)
		}
		if len(m) == 0 {
			return nil, usagef(`the answers object is empty: give at least one {"ID":"ANSWER"}`)
		}
		return m, nil
	}
	if len(args) == 0 {
		return nil, usagef("give at least one answer as ID=ANSWER (desk inputs ls SES shows the question ids); usage: %s", cmd.UseLine())
	}
	m := map[string]string{}
	var bad, twice []string
	for _, arg := range args {
		k, v, ok := strings.Cut(arg, "=")
		k = strings.TrimSpace(k)
		switch {
		case !ok || k == "":
			bad = append(bad, fmt.Sprintf("%q", arg))
		case m[k] != "":
			twice = append(twice, k)
		default:
			m[k] = v
		}
	}
	if len(bad) > 0 {
		return nil, usagef("%s: each answer is ID=ANSWER, such as q1=yes", strings.Join(bad, ", "))
	}
	if len(twice) > 0 {
		sort.Strings(twice)
		return nil, usagef("question %s is answered twice", strings.Join(twice, ", "))
	}
	return m, nil
}

func planCmd(g *globals) *cobra.Command {
	cmd := noun("plan", "List, approve, decline or revise the plan cards the agent proposed")
	cmd.AddCommand(planLsCmd(g))
	for _, op := range []struct{ name, short string }{
		{"approve", "Approve a plan card: the turn carries it out, with the plan kept in front of the agent"},
		{"decline", "Decline a plan card: the turn stops"},
		{"revise", "Ask for changes to a plan card (--notes required): the agent proposes a new card"},
	} {
		var notes string
		c := &cobra.Command{
			Use:   op.name + " PLN",
			Short: op.short,
			Args:  usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, a []string) error {
				if err := checkKind(a[0], "pln"); err != nil {
					return err
				}
				if op.name == "revise" && strings.TrimSpace(notes) == "" {
					return usagef("desk plan revise needs --notes saying what to change")
				}
				c, err := g.client()
				if err != nil {
					return err
				}
				p, err := c.DecidePlan(cmd.Context(), a[0], op.name, notes)
				if err != nil {
					return err
				}
				return out(cmd, g, p, func(w io.Writer) {
					fmt.Fprintf(w, "%s plan %s %q\n", p.Status, p.ID, planTitle(p.Card))
				})
			},
		}
		c.Flags().StringVar(&notes, "notes", "", "what to change (revise), or a note kept with the decision")
		cmd.AddCommand(c)
	}
	return cmd
}

// planLsCmd lists a session's plan cards. A plan waits only inside its
// running turn, so by default only the running turns are read; --all
// reads every turn's. The plans are read from the turns' events: each
// decision is a plan.<status> event carrying the plan.
func planLsCmd(g *globals) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "ls SES [--all]",
		Short: "List the plan cards waiting for a decision (--all: every plan of the session, oldest first)",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := checkKind(a[0], "ses"); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			xs, err := c.Executions(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			plans := []*desk.Plan{}
			for i := len(xs) - 1; i >= 0; i-- { // the API lists newest first
				if !all && xs[i].Terminal() {
					continue
				}
				x, err := c.Execution(cmd.Context(), xs[i].ID)
				if err != nil {
					return err
				}
				plans = append(plans, plansOf(x, all)...)
			}
			return out(cmd, g, plans, func(w io.Writer) {
				if len(plans) == 0 {
					if all {
						fmt.Fprintln(w, "no plans in this session")
					} else {
						fmt.Fprintln(w, "no plan is waiting (desk plan ls --all lists the decided ones)")
					}
					return
				}
				for _, p := range plans {
					fmt.Fprintf(w, "%s  %-9s %q  (turn %s)\n", p.ID, p.Status, planTitle(p.Card), p.ExecutionID)
					if p.Status == desk.PlanProposed {
						fmt.Fprintf(w, "    desk plan approve %s · desk plan decline %s · desk plan revise %s --notes \"…\"\n", p.ID, p.ID, p.ID)
					}
				}
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every plan of the session, decided ones and those of finished turns too")
	return cmd
}

// plansOf is an execution's plans as its events last left them, in the
// order they were proposed; without all, only those still waiting.
func plansOf(x *desk.Execution, all bool) []*desk.Plan {
	byID := map[string]*desk.Plan{}
	var order []string
	for _, e := range x.Events {
		if !strings.HasPrefix(e.Type, "plan.") {
			continue
		}
		var p desk.Plan
		if json.Unmarshal(e.Data, &p) != nil || !strings.HasPrefix(p.ID, "pln") || p.Status == "" {
			continue // plan.pinned and plan.updated name a plan without it
		}
		if byID[p.ID] == nil {
			order = append(order, p.ID)
		}
		byID[p.ID] = &p
	}
	var out []*desk.Plan
	for _, id := range order {
		if p := byID[id]; all || p.Status == desk.PlanProposed {
			out = append(out, p)
		}
	}
	return out
}

// planCard is the part of a plan card the CLI shows.
type planCard struct {
	Title string   `json:"title"`
	Steps []string `json:"steps"`
}

func planTitle(card json.RawMessage) string {
	var c planCard
	_ = json.Unmarshal(card, &c)
	return c.Title
}

// backticked quotes a command or a write the way the waiting message
// shows it.
func backticked(s string) string { return "`" + strings.ReplaceAll(s, "\n", " ") + "`" }

// agentSettingsCmd shows or changes what a workspace's turns wait for: the
// approval mode of gated calls and whether questions block.
func agentSettingsCmd(g *globals) *cobra.Command {
	var mode string
	var network, blocking, gitWritable bool
	cmd := &cobra.Command{
		Use:   "agent WS [--approval-mode user|auto-review|full-access] [--blocking-input=true|false] [--network=true|false] [--git-writable=true|false]",
		Short: "Show or change the workspace's agent settings: approval mode, blocking questions, network (admin to change)",
		Long: `Show a workspace's agent settings, or change the ones given (admin token).
--approval-mode user (the default) makes exec_command and writes to
/workspace wait for desk approve; auto-review lets a reviewer decide;
full-access runs commands on the host with no gate and no sandbox.
--blocking-input makes request_user_input wait (up to 5 minutes) for desk
answer instead of going on with the defaults. --network lets commands reach
the network. --git-writable lets the agent write /workspace's .git/hooks and
.git/config (read-only to it by default).`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			var p client.AgentSettingsPatch
			if cmd.Flags().Changed("approval-mode") {
				p.ApprovalMode = &mode
			}
			if cmd.Flags().Changed("blocking-input") {
				p.BlockingInput = &blocking
			}
			if cmd.Flags().Changed("network") {
				p.Network = &network
			}
			if cmd.Flags().Changed("git-writable") {
				p.GitWritable = &gitWritable
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			var st *desk.AgentSettings
			if p == (client.AgentSettingsPatch{}) {
				st, err = c.AgentSettings(cmd.Context(), a[0])
			} else {
				st, err = c.PatchAgentSettings(cmd.Context(), a[0], p)
			}
			if err != nil {
				return err
			}
			return out(cmd, g, st, func(w io.Writer) {
				budget := "none"
				if st.TokenBudget > 0 {
					budget = fmt.Sprint(st.TokenBudget)
				}
				fields(w, "approval mode", st.ApprovalMode, "blocking input", yesNo(st.BlockingInput),
					"network", yesNo(st.Network), "token budget", budget, "git writable", yesNo(st.GitWritable))
			})
		},
	}
	cmd.Flags().StringVar(&mode, "approval-mode", "", "user, auto-review or full-access")
	cmd.Flags().BoolVar(&blocking, "blocking-input", false, "questions wait for an answer")
	cmd.Flags().BoolVar(&network, "network", false, "commands may reach the network")
	cmd.Flags().BoolVar(&gitWritable, "git-writable", false, "the agent may write /workspace's .git/hooks and .git/config")
	return cmd
}
