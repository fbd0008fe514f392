// Package e2e holds desk's end-to-end tests: each runs the real desk
// binary (built once per test process, see TestMain) as a server and as a
// command line, and talks to it only as a user or another program would
// (HTTP, the CLI, its files in DESK_HOME, its exit statuses). Tests of
// cmd/desk's own functions stay in cmd/desk.
//
// The package has no code of its own besides this comment; the helpers
// are in desk_test.go: deskCmd runs one desk command line, startDesk
// starts one desk server.
package e2e
