// Package conversation owns a turn's records for any executor — the
// tool-loop agent (agent/) and the runtime host (runtimehost/) alike: the
// one gate through which a turn waits on a person (approvals, questions,
// plan cards: Gate), and the doors' side of the same records (deciding,
// answering and listing them, and reading transcripts). Both executors
// call the same code, so an approval asked by a Codex child and one asked
// by desk's own agent are recorded, archived, awaited, withdrawn and
// resumed alike.
package conversation

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/archive"
	"github.com/desk-runtime/desk/execution"
)

// Store is what the service reads and writes: the decision records, the
// commands that wait on them, and the transcript the doors page through.
type Store interface {
	GetSession(ctx context.Context, id string) (*desk.Session, error)
	GetExecution(ctx context.Context, id string) (*desk.Execution, error)
	UpdateCommand(ctx context.Context, c *desk.Command) error
	ListCommands(ctx context.Context, executionIDs []string) ([]*desk.Command, error)
	ListMessages(ctx context.Context, surfaceID string, beforeSeq int64, limit int) ([]*desk.Message, error)
	ListMessageTree(ctx context.Context, surfaceID string) ([]*desk.Message, error)
	AppendMessage(ctx context.Context, m *desk.Message) error

	CreateApproval(ctx context.Context, a *desk.Approval) error
	DecideApproval(ctx context.Context, id, status, optionID, by, reason string, at time.Time) (*desk.Approval, error)
	GetApproval(ctx context.Context, id string) (*desk.Approval, error)
	ListApprovals(ctx context.Context, sessionID string, pendingOnly bool) ([]*desk.Approval, error)

	CreateInputRequest(ctx context.Context, r *desk.InputRequest) error
	AnswerInputRequest(ctx context.Context, id, status string, answers map[string]string, at time.Time) (*desk.InputRequest, error)
	GetInputRequest(ctx context.Context, id string) (*desk.InputRequest, error)
	ListInputRequests(ctx context.Context, sessionID string) ([]*desk.InputRequest, error)

	CreatePlan(ctx context.Context, p *desk.Plan) error
	DecidePlan(ctx context.Context, id, status, notes string, at time.Time) (*desk.Plan, error)
	GetPlan(ctx context.Context, id string) (*desk.Plan, error)
	ListPlans(ctx context.Context, executionID string) ([]*desk.Plan, error)

	GetThread(ctx context.Context, id string) (*desk.Thread, error)
	ListThreads(ctx context.Context, sessionID, groupID string) ([]*desk.Thread, error)
	GetThreadGroup(ctx context.Context, id string) (*desk.ThreadGroup, error)
	ListThreadGroups(ctx context.Context, sessionID string) ([]*desk.ThreadGroup, error)
	GetEpisode(ctx context.Context, id string) (*desk.Episode, error)
	ListEpisodes(ctx context.Context, threadID string) ([]*desk.Episode, error)
}

// Options are the service's collaborators; all may be nil.
type Options struct {
	// Archive receives the channel archive's system records (approval
	// requested and resolved, input requested and submitted).
	Archive execution.Archiver
	// Submitter queues the answers of non-blocking input requests as a
	// request_user_input_answer row (the execution service; nil refuses
	// to queue them).
	Submitter desk.Submitter
	Logger    *slog.Logger
}

// Service is the conversation service. It holds no resources beyond the
// in-memory wake-ups of this process's waits, so it needs no Open or
// Close: a wait outlives nothing but its own call.
type Service struct {
	store   Store
	archive execution.Archiver
	submit  desk.Submitter
	log     *slog.Logger
	waiters sync.Map // decision id → chan struct{}
}

// New returns the service.
func New(store Store, o Options) *Service {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{store: store, archive: o.Archive, submit: o.Submitter, log: o.Logger}
}

// SetSubmitter gives the service the execution service after both are
// built: the execution service runs the executors that hold this service,
// so one of the two is made first.
func (s *Service) SetSubmitter(sub desk.Submitter) { s.submit = sub }

// record appends a system record to workspace ws's channel archive. An
// archive failure is logged, never the turn's: the records in the store
// are the truth, the archive their channel transcript.
func (s *Service) record(ws string, rec archive.Record) {
	if s.archive == nil {
		return
	}
	if err := s.archive.Append(context.Background(), ws, rec); err != nil {
		s.log.Error("archive system event", "err", err, "workspace_id", ws)
	}
}

var _ desk.ConversationService = (*Service)(nil)
