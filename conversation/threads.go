package conversation

import (
	"context"

	"github.com/desk-runtime/desk"
)

// The doors' read side of handler threads (svvy): a thread, its group and
// its episodes are visible exactly when the thread's session is
// (desk.VisibleSession), and a thread of a session the caller cannot see is
// as unknown as one that does not exist. Threads are started, followed up
// and reported by the thread tools, never through a door.

// Thread returns a thread of a session the caller sees.
func (s *Service) Thread(ctx context.Context, id string) (*desk.Thread, error) {
	t, err := s.store.GetThread(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := s.session(ctx, t.SessionID); err != nil {
		if desk.IsCode(err, desk.ENOTFOUND) {
			return nil, desk.Errorf(desk.ENOTFOUND, "thread %s not found", id)
		}
		return nil, err
	}
	return t, nil
}

// Threads lists a session's threads in start order, only those of one
// thread group when groupID is set (which must be a group of the session).
func (s *Service) Threads(ctx context.Context, sessionID, groupID string) ([]*desk.Thread, error) {
	x, err := s.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if groupID != "" {
		g, err := s.store.GetThreadGroup(ctx, groupID)
		if desk.IsCode(err, desk.ENOTFOUND) || (err == nil && g.SessionID != x.ID) {
			return nil, desk.Errorf(desk.ENOTFOUND, "thread group %s is not a thread group of session %s", groupID, x.ID)
		}
		if err != nil {
			return nil, err
		}
	}
	return s.store.ListThreads(ctx, x.ID, groupID)
}

// ThreadGroups lists a session's thread groups.
func (s *Service) ThreadGroups(ctx context.Context, sessionID string) ([]*desk.ThreadGroup, error) {
	x, err := s.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return s.store.ListThreadGroups(ctx, x.ID)
}

// Episodes lists a visible thread's episodes in the order recorded.
func (s *Service) Episodes(ctx context.Context, threadID string) ([]*desk.Episode, error) {
	t, err := s.Thread(ctx, threadID)
	if err != nil {
		return nil, err
	}
	return s.store.ListEpisodes(ctx, t.ID)
}

// Episode returns one episode of a visible thread.
func (s *Service) Episode(ctx context.Context, id string) (*desk.Episode, error) {
	e, err := s.store.GetEpisode(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := s.Thread(ctx, e.ThreadID); err != nil {
		if desk.IsCode(err, desk.ENOTFOUND) {
			return nil, desk.Errorf(desk.ENOTFOUND, "episode %s not found", id)
		}
		return nil, err
	}
	return e, nil
}
