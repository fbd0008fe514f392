// Package wire is the neutral contract between desk's runtime host and the
// transports that each speak one external agent's structured stdio
// protocol (ACP, Codex app-server, Claude Code stream-json).
//
// The host supervises the child process, maps what a transport reports onto
// desk's own records (assistant deltas, command records and tool spans,
// plan cards, approvals, the archive) and never branches on a runtime's
// name; a transport knows one protocol and nothing of desk's store. Both
// sides import only this package, so a transport is testable on its own
// against the real binary with a recording Sink.
package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"regexp"
	"strings"
)

// Protocol names one wire protocol a runtime speaks.
type Protocol string

// The protocols desk's host speaks.
const (
	ACP              Protocol = "acp"
	CodexAppServer   Protocol = "codex-app-server"
	ClaudeStreamJSON Protocol = "claude-stream-json"
)

// GatewayArgs is implemented by a transport whose program reads its
// model endpoint from its command line rather than from the
// environment: the arguments point it at desk's model gateway, whose root
// URL (http://127.0.0.1:PORT) is given, and come after the operator's.
type GatewayArgs interface {
	GatewayArgs(url string) []string
}

// Transport speaks one protocol. It is stateless; Attach makes a Conn per
// child process.
type Transport interface {
	// Args returns the arguments the host appends to the operator's argv
	// when it starts a child that must continue native conversation native
	// ("" for a new one). Most protocols reopen over the wire and return
	// nil; Claude Code's stream-json takes --resume on its command line.
	Args(native string) []string
	// Attach speaks the protocol over the started child's stdio. The host
	// owns the process: it closes Stdio and reaps the child after Close.
	Attach(ctx context.Context, stdio Stdio, opts Options) (Conn, error)
}

// Stdio is the child's standard input and output. The host drains stderr
// into desk's log; a transport never sees it.
type Stdio struct {
	Stdin  io.WriteCloser
	Stdout io.Reader
}

// Options are what a transport gets from the host for one child.
type Options struct {
	// Cwd is the working directory as the child sees it (/workspace or
	// the primary root), sent where the protocol asks for one.
	Cwd string
	// Client answers the requests an agent may make of its client (ACP's
	// fs/* and terminal/*) through desk's guest file system and sandbox;
	// nil means the transport declares no such capability.
	Client Client
	Log    *slog.Logger
	// MaxLine bounds one line of the child's stdout, its newline
	// included (DefaultMaxLine when 0). A longer line ends the
	// connection with LineTooLong, and a transport never holds more of it
	// than the bound.
	MaxLine int
}

// DefaultMaxLine is the default bound of one stdout line: a protocol
// message (a tool result, a file read) far above any real one, and a
// child that prints more without a newline costs desk no more than this.
const DefaultMaxLine = 16 << 20

// LineLimit is o.MaxLine, or DefaultMaxLine when unset.
func (o Options) LineLimit() int {
	if o.MaxLine > 0 {
		return o.MaxLine
	}
	return DefaultMaxLine
}

// ErrLineTooLong is wrapped by the error of a stdout line over the bound.
var ErrLineTooLong = errors.New("a line on the runtime's stdout is too long")

// LineTooLong is the error that ends a connection whose child printed a
// line longer than max bytes; it names the limit.
func LineTooLong(max int) error {
	return fmt.Errorf("%w: longer than the limit of %s (the host's MaxLineBytes); the runtime's process is stopped", ErrLineTooLong, Size(max))
}

// Size writes n bytes as people read it (16 MiB, 1.5 KiB, 100 bytes).
func Size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Conn is one live protocol connection to one child.
type Conn interface {
	// Open starts a new native conversation (native == "") or reopens the
	// exact one named, and returns its id ("" when the runtime reports it
	// only once a turn runs; it then reports it through Sink.NativeID).
	// When the runtime cannot reopen native, the error wraps
	// ErrCannotLoad and nothing new was started.
	Open(ctx context.Context, native string) (string, error)
	// Prompt runs one turn with the user's text, reporting what happens
	// to sink as it happens, and returns when the turn ended. A cancelled
	// ctx is a hard abort: Prompt returns at once, and the host kills the
	// child. A reopen that fails only on the first turn (stream-json)
	// returns an error wrapping ErrCannotLoad.
	Prompt(ctx context.Context, text string, sink Sink) (Result, error)
	// Cancel asks the runtime to stop the turn Prompt is running (ACP
	// session/cancel, Codex turn/interrupt, Claude Code's interrupt);
	// Prompt then returns with StopCancelled. It does not wait for that.
	Cancel(ctx context.Context) error
	// Close ends the protocol session; it does not kill the process.
	Close() error
}

// EndsAfterCancel is implemented by a Conn whose runtime cannot take
// another turn on the same process after a cancelled one. The host then
// stops the child as soon as the cancelled turn ended; the next turn
// starts a new one that reopens the native conversation exactly, as after
// any restart.
type EndsAfterCancel interface {
	EndsAfterCancel() bool
}

// Sink receives a turn's events, in order, from Prompt's goroutine or the
// transport's reader; its methods are safe to call from one goroutine at
// a time.
type Sink interface {
	// NativeID reports the runtime's conversation id when it learns it.
	NativeID(id string)
	// Text is a delta of the assistant's reply.
	Text(delta string)
	// Tool reports a tool call's start, progress or end, as the runtime
	// reports it; calls are matched by ID.
	Tool(ev ToolEvent)
	// Plan reports the runtime's current plan, whole each time.
	Plan(entries []PlanEntry)
	// Permission asks desk to decide a permission request. It blocks
	// until a person (or the workspace's approval mode) answered, and
	// returns the exact option chosen. ctx ends when the turn is
	// interrupted; then the transport answers the runtime "cancelled".
	Permission(ctx context.Context, req PermissionRequest) (PermissionAnswer, error)
}

// Noticer is a Sink that takes the runtime's own warnings and notices
// (a model it has no metadata for, a deprecated setting): they are events
// of their own, never part of the reply.
type Noticer interface {
	Notice(level, text string)
}

// Notify gives a notice to sink when it takes notices; it reports whether
// it did.
func Notify(sink Sink, level, text string) bool {
	n, ok := sink.(Noticer)
	if ok && strings.TrimSpace(text) != "" {
		n.Notice(level, strings.TrimSpace(text))
	}
	return ok
}

// noticeRE matches the warnings Codex prints into its reply stream when it
// runs under codex-acp (its WarningEvent reaches the client as message
// text): "Model metadata for `m` not found. Defaulting to fallback
// metadata; this can degrade performance and cause issues."
var noticeRE = regexp.MustCompile("(?s)\\s*(?:⚠\\s*)?(?:Warning: )?Model metadata for `[^`]*` not found\\. Defaulting to fallback metadata; this can degrade performance and cause issues\\.\\s*")

// SplitNotices takes the runtime's known warnings out of a piece of reply
// text: what remains of the reply, and the warnings.
func SplitNotices(text string) (string, []string) {
	locs := noticeRE.FindAllStringIndex(text, -1)
	if locs == nil {
		return text, nil
	}
	var rest strings.Builder
	var notices []string
	at := 0
	for _, l := range locs {
		rest.WriteString(text[at:l[0]])
		notices = append(notices, strings.TrimSpace(text[l[0]:l[1]]))
		at = l[1]
	}
	rest.WriteString(text[at:])
	return rest.String(), notices
}

// Tool call kinds a transport maps its runtime's calls to.
const (
	ToolCommand = "command" // runs a shell command
	ToolEdit    = "edit"    // changes files
	ToolRead    = "read"
	ToolSearch  = "search"
	ToolFetch   = "fetch"
	ToolOther   = "other"
)

// Tool call statuses.
const (
	ToolPending    = "pending"
	ToolInProgress = "in_progress"
	ToolCompleted  = "completed"
	ToolFailed     = "failed"
)

// ToolEvent is one report about one tool call.
type ToolEvent struct {
	ID     string          `json:"id"`
	Kind   string          `json:"kind"`
	Title  string          `json:"title"`
	Status string          `json:"status"`
	Input  json.RawMessage `json:"input,omitempty"`
	// Output is the output so far (or the whole of it when Status is
	// final), as the runtime reports it.
	Output    string   `json:"output,omitempty"`
	Locations []string `json:"locations,omitempty"`
}

// PlanEntry is one step of a runtime's plan.
type PlanEntry struct {
	Content  string `json:"content"`
	Status   string `json:"status"` // pending | in_progress | completed
	Priority string `json:"priority,omitempty"`
}

// Permission option kinds (ACP's words; other protocols map onto them).
const (
	AllowOnce    = "allow_once"
	AllowAlways  = "allow_always"
	RejectOnce   = "reject_once"
	RejectAlways = "reject_always"
)

// PermissionRequest is a runtime asking to do something.
type PermissionRequest struct {
	ToolCallID string             `json:"tool_call_id,omitempty"`
	Title      string             `json:"title"`
	Kind       string             `json:"kind"` // a Tool* kind
	Input      json.RawMessage    `json:"input,omitempty"`
	Options    []PermissionOption `json:"options"`
	// What a person reads, as far as the protocol tells it: the command
	// line (CommandLine makes one of an argv), the file an edit changes
	// and its diff, where the command runs and the runtime's reason.
	Command string `json:"command,omitempty"`
	Path    string `json:"path,omitempty"`
	Diff    string `json:"diff,omitempty"`
	Cwd     string `json:"cwd,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// CommandLine is a command as a person reads it: a string as it is; an
// argv joined with shell quoting, and a shell's "-c"/"-lc" wrapper
// (Codex runs every command as ["bash", "-lc", script]) reduced to its
// script. It is "" when v is neither.
func CommandLine(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		// Codex app-server reports `/bin/sh -lc 'script'` as one string.
		if m := shellWrapped.FindStringSubmatch(s); m != nil {
			return strings.ReplaceAll(m[1], `'\''`, "'")
		}
		return s
	}
	var argv []string
	if json.Unmarshal(v, &argv) != nil || len(argv) == 0 {
		return ""
	}
	if len(argv) == 3 && (argv[1] == "-c" || argv[1] == "-lc") {
		switch path.Base(argv[0]) {
		case "bash", "sh", "zsh", "dash":
			return argv[2]
		}
	}
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = shellQuote(a)
	}
	return strings.Join(out, " ")
}

// Readable fills what a person reads of req from a runtime's input
// object, when the transport has nothing better: its "command" (a string
// or an argv), "cwd" or "workdir", "reason" or "justification" or
// "description", and "file_path" or "path".
func (req *PermissionRequest) Readable(input json.RawMessage) {
	var in struct {
		Command       json.RawMessage `json:"command"`
		Cwd           string          `json:"cwd"`
		Workdir       string          `json:"workdir"`
		Reason        string          `json:"reason"`
		Justification string          `json:"justification"`
		Description   string          `json:"description"`
		FilePath      string          `json:"file_path"`
		Path          string          `json:"path"`
	}
	if json.Unmarshal(input, &in) != nil {
		return
	}
	first := func(dst *string, vs ...string) {
		for _, v := range vs {
			if *dst == "" && v != "" {
				*dst = v
			}
		}
	}
	first(&req.Command, CommandLine(in.Command))
	first(&req.Cwd, in.Cwd, in.Workdir)
	first(&req.Reason, in.Reason, in.Justification, in.Description)
	first(&req.Path, in.FilePath, in.Path)
}

// Diff is a whole-text change of path as a person reads it: the old
// lines marked "-", the new "+". It is not a minimal diff; runtimes
// report edits as old and new text, and a person deciding wants both.
func Diff(path, old, new string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", path, path)
	for _, pre := range []struct {
		mark, text string
	}{{"-", old}, {"+", new}} {
		if pre.text == "" {
			continue
		}
		for _, l := range strings.Split(strings.TrimSuffix(pre.text, "\n"), "\n") {
			b.WriteString(pre.mark + l + "\n")
		}
	}
	return b.String()
}

// shellWrapped is a shell's -c / -lc wrapper around one single-quoted
// script (whose own quotes are written '\”).
var shellWrapped = regexp.MustCompile(`^(?:/usr)?(?:/bin/)?(?:ba|z|da)?sh -l?c '((?:[^']|'\\'')*)'$`)

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// PermissionOption is one answer the runtime offers, with its exact id.
type PermissionOption struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Kind string `json:"kind"` // AllowOnce … RejectAlways
}

// PermissionAnswer is desk's decision: the chosen option's exact id, or
// Cancelled when the turn was interrupted before anyone answered.
type PermissionAnswer struct {
	OptionID  string `json:"option_id,omitempty"`
	Cancelled bool   `json:"cancelled,omitempty"`
}

// Stop reasons of a turn.
const (
	StopEndTurn   = "end_turn"
	StopCancelled = "cancelled"
	StopMaxTokens = "max_tokens"
	StopRefusal   = "refusal"
	StopFailed    = "failed"
)

// Result is how a turn ended.
type Result struct {
	StopReason string `json:"stop_reason"`
	// Reply is the turn's final assistant text when the protocol reports
	// it whole; "" lets the host use the Text deltas.
	Reply string `json:"reply,omitempty"`
	// Error is the runtime's own words when StopReason is StopFailed.
	Error string `json:"error,omitempty"`
}

// Client is desk as the agent's client (ACP fs/* and terminal/*). Paths
// are guest paths; the host resolves them through the guest file system
// and refuses what the session may not touch.
type Client interface {
	ReadTextFile(ctx context.Context, path string, line, limit int) (string, error)
	WriteTextFile(ctx context.Context, path, content string) error
	// Terminal runs a command in the session's sandbox; it is the
	// terminal/* family folded into one call per terminal: the transport
	// creates, polls and releases terminals around it.
	Terminal(ctx context.Context, req TerminalRequest) (Terminal, error)
}

// TerminalRequest is ACP's terminal/create.
type TerminalRequest struct {
	Command         string   `json:"command"`
	Args            []string `json:"args,omitempty"`
	Cwd             string   `json:"cwd,omitempty"`
	Env             []string `json:"env,omitempty"` // NAME=value
	OutputByteLimit int      `json:"output_byte_limit,omitempty"`
}

// Terminal is a command started for the agent.
type Terminal interface {
	// Output is the output so far, whether it was truncated, and the
	// exit status once the command ended (nil while it runs).
	Output() (out string, truncated bool, exit *ExitStatus)
	// Wait blocks until the command ends or ctx does.
	Wait(ctx context.Context) (ExitStatus, error)
	Kill() error
	// Release kills the command if it runs and frees it.
	Release() error
}

// ExitStatus is how a terminal's command ended.
type ExitStatus struct {
	Code   *int   `json:"exit_code,omitempty"`
	Signal string `json:"signal,omitempty"`
}

// ErrCannotLoad is wrapped by the error of a reopen the runtime refused
// (not supported, conversation gone): the host fails the turn with
// guidance and never starts a fresh conversation in its place.
var ErrCannotLoad = errors.New("the runtime cannot reopen this session's conversation")

// Errors a Client wraps so that a transport can answer the agent with the
// protocol's own error: a path that does not exist, and a request desk
// refuses (outside the write boundary, not a text file, too large, a bad
// argument). Anything else is a failure of the machine.
var (
	ErrNotFound = errors.New("not found")
	ErrRefused  = errors.New("refused")
)
