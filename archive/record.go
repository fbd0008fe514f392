package archive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
)

// SchemaVersion is the value of every record's schema_version. A change of
// the record contract is a new version plus a migration tool, never a silent
// edit of existing files.
const SchemaVersion = 1

// Directions.
const (
	Inbound  = "inbound"
	Outbound = "outbound"
	System   = "system"
)

// Event types: the closed set of the seed.
const (
	EventMessageInbound         = "message_inbound"
	EventMessageOutboundRuntime = "message_outbound_runtime"
	EventMessageOutboundChannel = "message_outbound_channel"
	EventSystem                 = "system_event"
)

// System types: the closed list of system_event's system_type.
const (
	SysRuntimeProgress    = "runtime_progress"
	SysApprovalRequested  = "approval_requested"
	SysApprovalResolved   = "approval_resolved"
	SysUserInputRequested = "user_input_requested"
	SysUserInputSubmitted = "user_input_submitted"
	SysTurnFailed         = "turn_failed"
	SysTurnInterrupted    = "turn_interrupted"
	SysRoutineStarted     = "routine_started"
	SysRoutineProgress    = "routine_progress"
	SysRoutineFinished    = "routine_finished"
)

// Closed value sets.
var (
	// EventTypes is the closed set of event types.
	EventTypes = []string{EventMessageInbound, EventMessageOutboundRuntime, EventMessageOutboundChannel, EventSystem}
	// SystemTypes is the closed list of system_event system types.
	SystemTypes = []string{SysRuntimeProgress, SysApprovalRequested, SysApprovalResolved,
		SysUserInputRequested, SysUserInputSubmitted, SysTurnFailed, SysTurnInterrupted,
		SysRoutineStarted, SysRoutineProgress, SysRoutineFinished}

	// RuntimeStatuses are the values of message_outbound_runtime.status:
	// a final reply (completed), an intermediate one (in_progress), or the
	// last word of a turn that failed or was interrupted.
	RuntimeStatuses = []string{"completed", "in_progress", "failed", "interrupted"}
	// EnvelopeTypes are the values of message_outbound_channel.envelope_type.
	// approval_request carries approval_id and user_input_request carries
	// request_id: the "limited extra stable fields" the seed allows for
	// special deliveries.
	EnvelopeTypes = []string{"text", "card", "file", "approval_request", "user_input_request"}
	// Decisions are the values of approval_resolved.decision.
	Decisions = []string{"approved", "denied", "expired", "cancelled"}
	// RoutineOutcomes are the values of routine_finished.status.
	RoutineOutcomes = []string{"succeeded", "failed", "cancelled"}
	// OriginKinds are the values of origin.kind.
	OriginKinds = []string{desk.OriginUser, desk.OriginAgent, desk.OriginSystem, desk.OriginRoutine}
)

// Envelope is what every record carries besides its event fields. The
// schema_version, direction and event_type of the written envelope come from
// the record's Go type and cannot be set by hand.
type Envelope struct {
	// At is when it happened. Zero means "now" by the archive's clock. It is
	// written as RFC 3339 (with nanoseconds when present) in the archive's
	// location, and it decides the day directory.
	At time.Time
	// Channel and ConversationID are the exact external ids; both are
	// required. They are written into every record, not only into the file
	// name (the seed: a record must make sense on its own).
	Channel        string
	ConversationID string
	// ThreadID and TurnID are the seed's internal tracking fields ("thread_id
	// / turn_id 作为记录内字段保留"): optional on every record, never a
	// sharding key. In desk a thread is a surface and a turn an execution.
	ThreadID string
	TurnID   string
	// Origin is desk's server-stamped provenance (optional; when present
	// its workspace_id must be the workspace the record is appended to).
	Origin *desk.Origin
}

// Header returns the record's envelope.
func (e *Envelope) Header() *Envelope { return e }

// Record is one archive record. It is sealed: only the types of this
// package implement it, one per event type (and per system_type), so a
// record of the wrong shape is hard to build; Append validates it anyway.
type Record interface {
	// EventType is one of the Event constants.
	EventType() string
	// SystemType is the system_type of a system_event, or "".
	SystemType() string
	// Direction is the direction the event type implies.
	Direction() string
	// Header is the record's envelope.
	Header() *Envelope
	// check validates the event fields; it is also the seal.
	check() error
}

// Attachment is the light metadata of an inbound attachment; the bytes are
// never archived.
type Attachment struct {
	Kind  string `json:"kind"`
	Name  string `json:"name,omitempty"`
	Token string `json:"token,omitempty"`
	Path  string `json:"path,omitempty"`
}

// MessageInbound is a user message received from a channel (direction
// inbound). Text is always written, even when empty.
type MessageInbound struct {
	Envelope         `json:"-"`
	MessageID        string       `json:"message_id,omitempty"`
	SenderID         string       `json:"sender_id,omitempty"`
	SenderName       string       `json:"sender_name,omitempty"`
	ChatType         string       `json:"chat_type,omitempty"`
	Text             string       `json:"text"`
	ReplyToMessageID string       `json:"reply_to_message_id,omitempty"`
	RootMessageID    string       `json:"root_message_id,omitempty"`
	ReplyToText      string       `json:"reply_to_text,omitempty"`
	Attachments      []Attachment `json:"attachments,omitempty"`
}

// MessageOutboundRuntime is a final or intermediate result the runtime
// produced (direction outbound). Its turn_id and thread_id are the
// envelope's TurnID and ThreadID.
type MessageOutboundRuntime struct {
	Envelope     `json:"-"`
	Status       string `json:"status"` // one of RuntimeStatuses
	Reply        string `json:"reply"`
	ReplyPreview string `json:"reply_preview,omitempty"`
	Error        string `json:"error,omitempty"`
}

// MessageOutboundChannel is a delivery to the external channel (direction
// outbound).
type MessageOutboundChannel struct {
	Envelope     `json:"-"`
	EnvelopeType string `json:"envelope_type"` // one of EnvelopeTypes
	MessageID    string `json:"message_id,omitempty"`
	Text         string `json:"text"`
	TextPreview  string `json:"text_preview,omitempty"`
	// ApprovalID is required with envelope_type approval_request and
	// refused with any other.
	ApprovalID string `json:"approval_id,omitempty"`
	// RequestID is required with envelope_type user_input_request and
	// refused with any other.
	RequestID string `json:"request_id,omitempty"`
}

// RuntimeProgress (system_type runtime_progress): a progress note of a
// running turn. TurnID (envelope) and Text are required.
type RuntimeProgress struct {
	Envelope `json:"-"`
	Text     string `json:"text"`
}

// ApprovalRequested (system_type approval_requested): a tool action waits
// for approval.
type ApprovalRequested struct {
	Envelope   `json:"-"`
	ApprovalID string `json:"approval_id"`
	Tool       string `json:"tool"`
	Summary    string `json:"summary,omitempty"`
}

// ApprovalResolved (system_type approval_resolved).
type ApprovalResolved struct {
	Envelope   `json:"-"`
	ApprovalID string `json:"approval_id"`
	Decision   string `json:"decision"` // one of Decisions
	Reason     string `json:"reason,omitempty"`
}

// UserInputRequested (system_type user_input_requested): the agent asked
// the user one or more questions.
type UserInputRequested struct {
	Envelope  `json:"-"`
	RequestID string   `json:"request_id"`
	Questions []string `json:"questions"`
}

// UserInputSubmitted (system_type user_input_submitted). Answer is always
// written, even when empty.
type UserInputSubmitted struct {
	Envelope  `json:"-"`
	RequestID string `json:"request_id"`
	Answer    string `json:"answer"`
}

// TurnFailed (system_type turn_failed). TurnID (envelope) and Error are
// required.
type TurnFailed struct {
	Envelope `json:"-"`
	Error    string `json:"error"`
}

// TurnInterrupted (system_type turn_interrupted). TurnID (envelope) and
// Reason are required.
type TurnInterrupted struct {
	Envelope `json:"-"`
	Reason   string `json:"reason"`
}

// RoutineStarted (system_type routine_started).
type RoutineStarted struct {
	Envelope  `json:"-"`
	RoutineID string `json:"routine_id"`
	Name      string `json:"name,omitempty"`
}

// RoutineProgress (system_type routine_progress). Progress is a short
// human-readable note ("3/10 files", "indexing").
type RoutineProgress struct {
	Envelope  `json:"-"`
	RoutineID string `json:"routine_id"`
	Name      string `json:"name,omitempty"`
	Progress  string `json:"progress"`
}

// RoutineFinished (system_type routine_finished).
type RoutineFinished struct {
	Envelope  `json:"-"`
	RoutineID string `json:"routine_id"`
	Name      string `json:"name,omitempty"`
	Status    string `json:"status"` // one of RoutineOutcomes
}

func (*MessageInbound) EventType() string         { return EventMessageInbound }
func (*MessageOutboundRuntime) EventType() string { return EventMessageOutboundRuntime }
func (*MessageOutboundChannel) EventType() string { return EventMessageOutboundChannel }
func (*RuntimeProgress) EventType() string        { return EventSystem }
func (*ApprovalRequested) EventType() string      { return EventSystem }
func (*ApprovalResolved) EventType() string       { return EventSystem }
func (*UserInputRequested) EventType() string     { return EventSystem }
func (*UserInputSubmitted) EventType() string     { return EventSystem }
func (*TurnFailed) EventType() string             { return EventSystem }
func (*TurnInterrupted) EventType() string        { return EventSystem }
func (*RoutineStarted) EventType() string         { return EventSystem }
func (*RoutineProgress) EventType() string        { return EventSystem }
func (*RoutineFinished) EventType() string        { return EventSystem }

func (*MessageInbound) SystemType() string         { return "" }
func (*MessageOutboundRuntime) SystemType() string { return "" }
func (*MessageOutboundChannel) SystemType() string { return "" }
func (*RuntimeProgress) SystemType() string        { return SysRuntimeProgress }
func (*ApprovalRequested) SystemType() string      { return SysApprovalRequested }
func (*ApprovalResolved) SystemType() string       { return SysApprovalResolved }
func (*UserInputRequested) SystemType() string     { return SysUserInputRequested }
func (*UserInputSubmitted) SystemType() string     { return SysUserInputSubmitted }
func (*TurnFailed) SystemType() string             { return SysTurnFailed }
func (*TurnInterrupted) SystemType() string        { return SysTurnInterrupted }
func (*RoutineStarted) SystemType() string         { return SysRoutineStarted }
func (*RoutineProgress) SystemType() string        { return SysRoutineProgress }
func (*RoutineFinished) SystemType() string        { return SysRoutineFinished }

func (*MessageInbound) Direction() string         { return Inbound }
func (*MessageOutboundRuntime) Direction() string { return Outbound }
func (*MessageOutboundChannel) Direction() string { return Outbound }
func (*RuntimeProgress) Direction() string        { return System }
func (*ApprovalRequested) Direction() string      { return System }
func (*ApprovalResolved) Direction() string       { return System }
func (*UserInputRequested) Direction() string     { return System }
func (*UserInputSubmitted) Direction() string     { return System }
func (*TurnFailed) Direction() string             { return System }
func (*TurnInterrupted) Direction() string        { return System }
func (*RoutineStarted) Direction() string         { return System }
func (*RoutineProgress) Direction() string        { return System }
func (*RoutineFinished) Direction() string        { return System }

// ContractError is the error of a record that breaks the archive contract.
// Append returns it for a refused record; errors.As on a *desk.Error finds
// code invalid.
type ContractError struct {
	Field  string // the offending JSON field, or "" for the record as a whole
	Reason string
}

func (e *ContractError) Error() string {
	if e.Field == "" {
		return "archive contract: " + e.Reason
	}
	return "archive contract: " + e.Field + ": " + e.Reason
}

// Unwrap maps a contract violation to desk's invalid error code.
func (e *ContractError) Unwrap() error { return desk.Errorf(desk.EINVALID, "%s", e.Error()) }

// IsRefused reports whether err is a contract refusal.
func IsRefused(err error) bool {
	var ce *ContractError
	return errors.As(err, &ce)
}

func refuse(field, format string, args ...any) *ContractError {
	return &ContractError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

func text(field, v string) error {
	if !utf8.ValidString(v) {
		return refuse(field, "not valid UTF-8")
	}
	return nil
}

func required(field, v string) error {
	if v == "" {
		return refuse(field, "required")
	}
	return text(field, v)
}

func oneOf(field, v string, set []string) error {
	for _, s := range set {
		if v == s {
			return nil
		}
	}
	if v == "" {
		return refuse(field, "required")
	}
	return refuse(field, "%q is not one of %s", v, strings.Join(set, ", "))
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func absent(field, v, because string) error {
	if v != "" {
		return refuse(field, "not allowed %s", because)
	}
	return nil
}

func (r *MessageInbound) check() error {
	if err := firstErr(text("message_id", r.MessageID), text("sender_id", r.SenderID),
		text("sender_name", r.SenderName), text("chat_type", r.ChatType), text("text", r.Text),
		text("reply_to_message_id", r.ReplyToMessageID), text("root_message_id", r.RootMessageID),
		text("reply_to_text", r.ReplyToText)); err != nil {
		return err
	}
	for i, a := range r.Attachments {
		f := fmt.Sprintf("attachments[%d].", i)
		if err := firstErr(required(f+"kind", a.Kind), text(f+"name", a.Name), text(f+"token", a.Token),
			text(f+"path", a.Path)); err != nil {
			return err
		}
	}
	return nil
}

func (r *MessageOutboundRuntime) check() error {
	return firstErr(oneOf("status", r.Status, RuntimeStatuses), text("reply", r.Reply),
		text("reply_preview", r.ReplyPreview), text("error", r.Error))
}

func (r *MessageOutboundChannel) check() error {
	if err := firstErr(oneOf("envelope_type", r.EnvelopeType, EnvelopeTypes), text("message_id", r.MessageID),
		text("text", r.Text), text("text_preview", r.TextPreview)); err != nil {
		return err
	}
	if r.EnvelopeType == "approval_request" {
		if err := required("approval_id", r.ApprovalID); err != nil {
			return err
		}
	} else if err := absent("approval_id", r.ApprovalID, "unless envelope_type is approval_request"); err != nil {
		return err
	}
	if r.EnvelopeType == "user_input_request" {
		return required("request_id", r.RequestID)
	}
	return absent("request_id", r.RequestID, "unless envelope_type is user_input_request")
}

func (r *RuntimeProgress) check() error {
	return firstErr(required("turn_id", r.TurnID), required("text", r.Text))
}

func (r *ApprovalRequested) check() error {
	return firstErr(required("approval_id", r.ApprovalID), required("tool", r.Tool), text("summary", r.Summary))
}

func (r *ApprovalResolved) check() error {
	return firstErr(required("approval_id", r.ApprovalID), oneOf("decision", r.Decision, Decisions),
		text("reason", r.Reason))
}

func (r *UserInputRequested) check() error {
	if err := required("request_id", r.RequestID); err != nil {
		return err
	}
	if len(r.Questions) == 0 {
		return refuse("questions", "at least one question is required")
	}
	for i, q := range r.Questions {
		if err := required(fmt.Sprintf("questions[%d]", i), q); err != nil {
			return err
		}
	}
	return nil
}

func (r *UserInputSubmitted) check() error {
	return firstErr(required("request_id", r.RequestID), text("answer", r.Answer))
}

func (r *TurnFailed) check() error {
	return firstErr(required("turn_id", r.TurnID), required("error", r.Error))
}

func (r *TurnInterrupted) check() error {
	return firstErr(required("turn_id", r.TurnID), required("reason", r.Reason))
}

func (r *RoutineStarted) check() error {
	return firstErr(required("routine_id", r.RoutineID), text("name", r.Name))
}

func (r *RoutineProgress) check() error {
	return firstErr(required("routine_id", r.RoutineID), text("name", r.Name), required("progress", r.Progress))
}

func (r *RoutineFinished) check() error {
	return firstErr(required("routine_id", r.RoutineID), text("name", r.Name),
		oneOf("status", r.Status, RoutineOutcomes))
}

// head is the written envelope plus the tracking fields, in the order they
// appear on every line. tail is desk's provenance, written last.
type head struct {
	SchemaVersion  int    `json:"schema_version"`
	At             string `json:"at"`
	Direction      string `json:"direction"`
	EventType      string `json:"event_type"`
	Channel        string `json:"channel"`
	ConversationID string `json:"conversation_id"`
	SystemType     string `json:"system_type,omitempty"`
	TurnID         string `json:"turn_id,omitempty"`
	ThreadID       string `json:"thread_id,omitempty"`
}

type tail struct {
	Origin *desk.Origin `json:"origin,omitempty"`
}

// minYear and maxYear bound `at` to what RFC 3339 and the YYYY directory
// can express.
const (
	minYear = 1
	maxYear = 9999
)

// checkRecord validates the whole record against the contract for the given
// workspace. The envelope's At must already be set.
func checkRecord(ws string, r Record) error {
	if r == nil || isNilRecord(r) {
		return refuse("", "nil record")
	}
	if !known(r) {
		return refuse("event_type", "%T is not a record type of this package", r)
	}
	e := r.Header()
	if e.At.IsZero() {
		return refuse("at", "required")
	}
	if y := e.At.Year(); y < minYear || y > maxYear {
		return refuse("at", "year %d out of range", y)
	}
	if err := firstErr(required("channel", e.Channel), required("conversation_id", e.ConversationID),
		text("thread_id", e.ThreadID), text("turn_id", e.TurnID)); err != nil {
		return err
	}
	if o := e.Origin; o != nil {
		if o.WorkspaceID != ws {
			return refuse("origin.workspace_id", "%q is not the workspace %q the record is appended to", o.WorkspaceID, ws)
		}
		// Actor may be empty for desk's own (system) records.
		if err := firstErr(text("origin.actor", o.Actor), oneOf("origin.kind", o.Kind, OriginKinds),
			text("origin.session_id", o.SessionID), text("origin.execution_id", o.ExecutionID),
			text("origin.surface_id", o.SurfaceID), text("origin.command_id", o.CommandID)); err != nil {
			return err
		}
	}
	return r.check()
}

// known reports whether r is one of this package's concrete record types
// (and not, say, another type that embeds one and overrides a method).
func known(r Record) bool {
	switch r.(type) {
	case *MessageInbound, *MessageOutboundRuntime, *MessageOutboundChannel, *RuntimeProgress,
		*ApprovalRequested, *ApprovalResolved, *UserInputRequested, *UserInputSubmitted,
		*TurnFailed, *TurnInterrupted, *RoutineStarted, *RoutineProgress, *RoutineFinished:
		return true
	}
	return false
}

func isNilRecord(r Record) bool {
	switch v := r.(type) {
	case *MessageInbound:
		return v == nil
	case *MessageOutboundRuntime:
		return v == nil
	case *MessageOutboundChannel:
		return v == nil
	case *RuntimeProgress:
		return v == nil
	case *ApprovalRequested:
		return v == nil
	case *ApprovalResolved:
		return v == nil
	case *UserInputRequested:
		return v == nil
	case *UserInputSubmitted:
		return v == nil
	case *TurnFailed:
		return v == nil
	case *TurnInterrupted:
		return v == nil
	case *RoutineStarted:
		return v == nil
	case *RoutineProgress:
		return v == nil
	case *RoutineFinished:
		return v == nil
	}
	return false
}

// composite returns the value whose JSON encoding is the record's line:
// envelope first, then the event fields, then origin.
func composite(h *head, r Record, t *tail) any {
	switch v := r.(type) {
	case *MessageInbound:
		return &struct {
			*head
			*MessageInbound
			*tail
		}{h, v, t}
	case *MessageOutboundRuntime:
		return &struct {
			*head
			*MessageOutboundRuntime
			*tail
		}{h, v, t}
	case *MessageOutboundChannel:
		return &struct {
			*head
			*MessageOutboundChannel
			*tail
		}{h, v, t}
	case *RuntimeProgress:
		return &struct {
			*head
			*RuntimeProgress
			*tail
		}{h, v, t}
	case *ApprovalRequested:
		return &struct {
			*head
			*ApprovalRequested
			*tail
		}{h, v, t}
	case *ApprovalResolved:
		return &struct {
			*head
			*ApprovalResolved
			*tail
		}{h, v, t}
	case *UserInputRequested:
		return &struct {
			*head
			*UserInputRequested
			*tail
		}{h, v, t}
	case *UserInputSubmitted:
		return &struct {
			*head
			*UserInputSubmitted
			*tail
		}{h, v, t}
	case *TurnFailed:
		return &struct {
			*head
			*TurnFailed
			*tail
		}{h, v, t}
	case *TurnInterrupted:
		return &struct {
			*head
			*TurnInterrupted
			*tail
		}{h, v, t}
	case *RoutineStarted:
		return &struct {
			*head
			*RoutineStarted
			*tail
		}{h, v, t}
	case *RoutineProgress:
		return &struct {
			*head
			*RoutineProgress
			*tail
		}{h, v, t}
	case *RoutineFinished:
		return &struct {
			*head
			*RoutineFinished
			*tail
		}{h, v, t}
	}
	return nil
}

// newRecord returns an empty record for an event type and system type, or
// nil when the pair is not in the contract.
func newRecord(eventType, systemType string) Record {
	switch eventType {
	case EventMessageInbound:
		if systemType == "" {
			return &MessageInbound{}
		}
	case EventMessageOutboundRuntime:
		if systemType == "" {
			return &MessageOutboundRuntime{}
		}
	case EventMessageOutboundChannel:
		if systemType == "" {
			return &MessageOutboundChannel{}
		}
	case EventSystem:
		switch systemType {
		case SysRuntimeProgress:
			return &RuntimeProgress{}
		case SysApprovalRequested:
			return &ApprovalRequested{}
		case SysApprovalResolved:
			return &ApprovalResolved{}
		case SysUserInputRequested:
			return &UserInputRequested{}
		case SysUserInputSubmitted:
			return &UserInputSubmitted{}
		case SysTurnFailed:
			return &TurnFailed{}
		case SysTurnInterrupted:
			return &TurnInterrupted{}
		case SysRoutineStarted:
			return &RoutineStarted{}
		case SysRoutineProgress:
			return &RoutineProgress{}
		case SysRoutineFinished:
			return &RoutineFinished{}
		}
	}
	return nil
}

// encode validates r for workspace ws and returns its line, with the
// trailing '\n'. At must already be set; it is written in loc.
func encode(ws string, r Record, loc *time.Location) ([]byte, error) {
	if err := checkRecord(ws, r); err != nil {
		return nil, err
	}
	e := r.Header()
	h := &head{
		SchemaVersion:  SchemaVersion,
		At:             e.At.In(loc).Format(time.RFC3339Nano),
		Direction:      r.Direction(),
		EventType:      r.EventType(),
		Channel:        e.Channel,
		ConversationID: e.ConversationID,
		SystemType:     r.SystemType(),
		TurnID:         e.TurnID,
		ThreadID:       e.ThreadID,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// The archive is read by people with jq and less; keep <, > and &
	// readable instead of \u003c.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(composite(h, r, &tail{Origin: e.Origin})); err != nil {
		return nil, refuse("", "encode: %v", err)
	}
	// That every encoded record parses under the rules the readers apply
	// (ParseLine) is checked by the tests for every type; re-parsing here
	// would double the CPU cost of an append.
	return buf.Bytes(), nil
}

// ParseLine parses one archive line (without its '\n') strictly: the
// envelope must be complete and consistent, the event_type and system_type
// known, and no field outside the type's closed set may appear. The
// returned record's At keeps the offset written in the line.
func ParseLine(line []byte) (Record, error) {
	var probe struct {
		SchemaVersion  *int    `json:"schema_version"`
		EventType      *string `json:"event_type"`
		SystemType     *string `json:"system_type"`
		Direction      *string `json:"direction"`
		At             *string `json:"at"`
		Channel        *string `json:"channel"`
		ConversationID *string `json:"conversation_id"`
	}
	if err := json.Unmarshal(line, &probe); err != nil {
		return nil, refuse("", "not a record: %v", err)
	}
	switch {
	case probe.SchemaVersion == nil:
		return nil, refuse("schema_version", "required")
	case *probe.SchemaVersion != SchemaVersion:
		return nil, refuse("schema_version", "%d is not %d", *probe.SchemaVersion, SchemaVersion)
	case probe.At == nil:
		return nil, refuse("at", "required")
	case probe.Direction == nil:
		return nil, refuse("direction", "required")
	case probe.EventType == nil:
		return nil, refuse("event_type", "required")
	case probe.Channel == nil:
		return nil, refuse("channel", "required")
	case probe.ConversationID == nil:
		return nil, refuse("conversation_id", "required")
	}
	st := ""
	if probe.SystemType != nil {
		st = *probe.SystemType
		if st == "" || *probe.EventType != EventSystem {
			return nil, refuse("system_type", "only a system_event has a system_type")
		}
	} else if *probe.EventType == EventSystem {
		return nil, refuse("system_type", "required")
	}
	r := newRecord(*probe.EventType, st)
	if r == nil {
		if *probe.EventType == EventSystem {
			return nil, refuse("system_type", "%q is not in the closed list", st)
		}
		return nil, refuse("event_type", "%q is not in the closed set", *probe.EventType)
	}
	if *probe.Direction != r.Direction() {
		return nil, refuse("direction", "%q does not match %s (%s)", *probe.Direction, r.EventType(), r.Direction())
	}
	h, t := &head{}, &tail{}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(composite(h, r, t)); err != nil {
		return nil, refuse("", "%v", err)
	}
	if dec.More() {
		return nil, refuse("", "trailing data after the record")
	}
	at, err := time.Parse(time.RFC3339Nano, h.At)
	if err != nil {
		return nil, refuse("at", "not RFC 3339: %q", h.At)
	}
	e := r.Header()
	*e = Envelope{At: at, Channel: h.Channel, ConversationID: h.ConversationID,
		ThreadID: h.ThreadID, TurnID: h.TurnID, Origin: t.Origin}
	ws := ""
	if t.Origin != nil {
		ws = t.Origin.WorkspaceID
	}
	if err := checkRecord(ws, r); err != nil {
		return nil, err
	}
	return r, nil
}
