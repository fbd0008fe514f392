package acp_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk/runtimehost/acp"
	"github.com/desk-runtime/desk/runtimehost/wire"
)

// A child that prints something other than JSON-RPC fails Attach at once
// with an error quoting the line (the SDK alone skips such lines and the
// initialize request would wait forever).
func TestGarbageOnStdout(t *testing.T) {
	cmd := exec.Command("sh", "-c", "echo 'Welcome to not-an-agent'; exec sleep 30")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := acp.Transport{}.Attach(ctx, wire.Stdio{Stdin: in, Stdout: out}, wire.Options{})
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "not ACP JSON-RPC") || !strings.Contains(err.Error(), "Welcome to not-an-agent") {
		t.Fatalf("attach to a child printing garbage: %v", err)
	}
}
