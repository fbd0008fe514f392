package conversation

import (
	"context"

	"github.com/desk-runtime/desk"
)

// An interrupted step keeps what it said (#28 item 3): the executor
// appends the text streamed so far as an assistant message marked
// interrupted, and the mark names who stopped the turn. The interrupt is
// recorded on the execution row before the executor is cancelled
// (execution.Service.doStop), so it is read from there.

// MarkInterrupted marks m, a partial assistant message of execution
// exeID, as cut short by the execution's interruption.
func MarkInterrupted(ctx context.Context, st interface {
	GetExecution(ctx context.Context, id string) (*desk.Execution, error)
}, m *desk.Message, exeID string) {
	var in *desk.Interruption
	if x, err := st.GetExecution(context.WithoutCancel(ctx), exeID); err == nil && x.Interruption != nil {
		in = x.Interruption
	}
	m.MarkInterrupted(in)
}
