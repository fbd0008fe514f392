package tools

import "github.com/desk-runtime/desk"

// The identity of a command is the root's (desk.Identity), which the
// runtime host gives its children too.
const (
	EnvSessionID   = desk.EnvSessionID
	EnvSignature   = desk.EnvSignature
	EnvWorkspaceID = desk.EnvWorkspaceID
	EnvThreadID    = desk.EnvThreadID
)

// Identity is desk.Identity.
type Identity = desk.Identity

// IdentityOf is desk.IdentityOf.
func IdentityOf(x *desk.Session, surface string) Identity { return desk.IdentityOf(x, surface) }

// identityVars are the identity variables of a tool call's command.
func identityVars(env *Env) map[string]string {
	surface := ""
	if env.Execution != nil {
		surface = env.Execution.SurfaceID
	}
	id := IdentityOf(env.Session, surface)
	if env.Thread != nil {
		id.ThreadID = env.Thread.ID
	}
	return id.Vars()
}
