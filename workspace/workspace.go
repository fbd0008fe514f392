// Package workspace owns workspaces and actors: creating them with their
// directories, minting actor tokens, and turning bearer tokens into
// principals. It decides who may see which workspace; it never reads or
// writes a session's files.
package workspace

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/layout"
)

// TokenPrefix starts every actor token, so a token found in a log or a
// secret scanner is recognisable as desk's.
const TokenPrefix = "desk_"

// Service is the workspace service.
type Service struct {
	store      Store
	home       layout.Home
	adminToken string
}

var _ desk.WorkspaceService = (*Service)(nil)

// New returns the workspace service. adminToken must be non-empty.
func New(store Store, home layout.Home, adminToken string) *Service {
	return &Service{store: store, home: home, adminToken: adminToken}
}

func principal(ctx context.Context) (desk.Principal, error) {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok {
		return p, desk.Errorf(desk.EUNAUTHORIZED, "no credentials")
	}
	return p, nil
}

// ValidName checks a display name: present, at most 200 characters, no
// control characters.
func ValidName(what, name string) error {
	if strings.TrimSpace(name) == "" {
		return desk.Errorf(desk.EINVALID, "%s is required", what)
	}
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > 200 {
		return desk.Errorf(desk.EINVALID, "%s must be valid UTF-8 of at most 200 characters", what)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return desk.Errorf(desk.EINVALID, "%s must not contain control characters", what)
		}
	}
	return nil
}

func (s *Service) CreateWorkspace(ctx context.Context, in desk.WorkspaceCreate) (*desk.Workspace, error) {
	if err := desk.RequireAdmin(ctx, "create workspaces"); err != nil {
		return nil, err
	}
	if err := ValidName("workspace name", in.Name); err != nil {
		return nil, err
	}
	now := desk.Now()
	w := &desk.Workspace{ID: desk.NewID(desk.PrefixWorkspace), Name: strings.TrimSpace(in.Name), State: desk.WorkspaceActive, CreatedAt: now, UpdatedAt: now}
	owner := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w.ID, Name: desk.OwnerActorName, Kind: desk.ActorHuman, CreatedAt: now}
	// The row comes first: a directory without a row would be invisible
	// debris, while a row whose directories are missing heals itself
	// because every writer creates the directories it needs.
	if err := s.store.CreateWorkspace(ctx, w, owner, in.AllowDuplicateName); err != nil {
		return nil, err
	}
	for _, rel := range []string{layout.CheckoutDir, layout.ActorRel(owner.ID)} {
		if err := os.MkdirAll(s.home.Abs(w.ID, rel), 0o755); err != nil {
			return nil, fmt.Errorf("create workspace directories: %w", err)
		}
	}
	return w, nil
}

func (s *Service) GetWorkspace(ctx context.Context, id string) (*desk.Workspace, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if !p.CanSeeWorkspace(id) {
		// Answer as if it did not exist, so tokens cannot probe ids.
		return nil, desk.Errorf(desk.ENOTFOUND, "workspace %s not found", id)
	}
	return s.store.GetWorkspace(ctx, id)
}

func (s *Service) ListWorkspaces(ctx context.Context) ([]*desk.Workspace, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if !p.Admin {
		w, err := s.store.GetWorkspace(ctx, p.WorkspaceID)
		if err != nil {
			return nil, err
		}
		return []*desk.Workspace{w}, nil
	}
	all, err := s.store.ListWorkspaces(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, w := range all {
		if w.ID != desk.ManagerWorkspaceID {
			out = append(out, w)
		}
	}
	return out, nil
}

// Manager returns the workspace manager, made on first use with its own
// owner and directories. Two first uses at once make it once: the loser's
// insert conflicts and it reads the winner's row.
func (s *Service) Manager(ctx context.Context) (*desk.Workspace, error) {
	if err := desk.RequireAdmin(ctx, "open the workspace manager"); err != nil {
		return nil, err
	}
	if w, err := s.store.GetWorkspace(ctx, desk.ManagerWorkspaceID); err == nil {
		return w, nil
	} else if !desk.IsCode(err, desk.ENOTFOUND) {
		return nil, err
	}
	now := desk.Now()
	w := &desk.Workspace{ID: desk.ManagerWorkspaceID, Name: desk.ManagerName, State: desk.WorkspaceActive, CreatedAt: now, UpdatedAt: now}
	owner := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w.ID, Name: desk.OwnerActorName, Kind: desk.ActorHuman, CreatedAt: now}
	if err := s.store.CreateWorkspace(ctx, w, owner, true); err != nil {
		if got, gerr := s.store.GetWorkspace(ctx, desk.ManagerWorkspaceID); gerr == nil {
			return got, nil
		}
		return nil, err
	}
	for _, rel := range []string{layout.CheckoutDir, layout.ActorRel(owner.ID)} {
		if err := os.MkdirAll(s.home.Abs(w.ID, rel), 0o755); err != nil {
			return nil, fmt.Errorf("create the workspace manager's directories: %w", err)
		}
	}
	return w, nil
}

var actorName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (s *Service) CreateActor(ctx context.Context, workspaceID, name, kind string) (*desk.Actor, string, error) {
	if err := desk.RequireAdmin(ctx, "create actors"); err != nil {
		return nil, "", err
	}
	if !actorName.MatchString(name) {
		return nil, "", desk.Errorf(desk.EINVALID, "actor name %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	if kind != desk.ActorHuman && kind != desk.ActorAgent {
		return nil, "", desk.Errorf(desk.EINVALID, "actor kind %q must be %q or %q", kind, desk.ActorHuman, desk.ActorAgent)
	}
	if _, err := s.store.GetWorkspace(ctx, workspaceID); err != nil {
		return nil, "", err
	}
	token := newToken()
	a := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: workspaceID, Name: name, Kind: kind, CreatedAt: desk.Now()}
	if err := s.store.CreateActor(ctx, a, HashToken(token)); err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(s.home.Abs(workspaceID, layout.ActorRel(a.ID)), 0o755); err != nil {
		return nil, "", fmt.Errorf("create actor area: %w", err)
	}
	return a, token, nil
}

func (s *Service) ListActors(ctx context.Context, workspaceID string) ([]*desk.Actor, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if !p.CanSeeWorkspace(workspaceID) {
		return nil, desk.Errorf(desk.ENOTFOUND, "workspace %s not found", workspaceID)
	}
	if !p.Admin {
		a, err := s.store.GetActor(ctx, p.ActorID)
		if err != nil {
			return nil, err
		}
		return []*desk.Actor{a}, nil
	}
	if _, err := s.store.GetWorkspace(ctx, workspaceID); err != nil {
		return nil, err
	}
	return s.store.ListActors(ctx, workspaceID)
}

func (s *Service) ResolveActor(ctx context.Context, workspaceID, idOrName string) (*desk.Actor, error) {
	var a *desk.Actor
	var err error
	if desk.HasPrefix(idOrName, desk.PrefixActor) {
		a, err = s.store.GetActor(ctx, idOrName)
		if err == nil && a.WorkspaceID != workspaceID {
			err = desk.Errorf(desk.ENOTFOUND, "actor %s not found", idOrName)
		}
	} else {
		a, err = s.store.ActorByName(ctx, workspaceID, idOrName)
	}
	if desk.IsCode(err, desk.ENOTFOUND) {
		return nil, desk.Errorf(desk.ENOTFOUND, "actor %q not found in workspace %s", idOrName, workspaceID)
	}
	return a, err
}

func (s *Service) Authenticate(ctx context.Context, token string) (desk.Principal, error) {
	if token == "" {
		return desk.Principal{}, desk.Errorf(desk.EUNAUTHORIZED, "missing bearer token")
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.adminToken)) == 1 {
		return desk.Principal{Admin: true}, nil
	}
	if strings.HasPrefix(token, TokenPrefix) {
		a, err := s.store.ActorByTokenHash(ctx, HashToken(token))
		if err == nil {
			return desk.Principal{WorkspaceID: a.WorkspaceID, ActorID: a.ID, ActorKind: a.Kind}, nil
		}
		if !desk.IsCode(err, desk.ENOTFOUND) {
			return desk.Principal{}, err
		}
	}
	return desk.Principal{}, desk.Errorf(desk.EUNAUTHORIZED, "unknown bearer token")
}

// HashToken is how tokens are stored: only their SHA-256, so a copy of the
// database does not hand out working credentials.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func newToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("workspace: crypto/rand failed: " + err.Error())
	}
	return TokenPrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// NewAdminToken returns a fresh random admin token.
func NewAdminToken() string {
	return strings.Replace(newToken(), TokenPrefix, "deskadm_", 1)
}
