package main

import (
	"context"
	"io"
	"testing"

	"github.com/desk-runtime/desk/client"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// desk mcp speaks MCP on stdin/stdout to a running desk, with the CLI's
// --server and --token.
func TestMCPStdio(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	adm, err := client.New(c.url, c.token)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := adm.CreateWorkspace(context.Background(), "stdio")
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := adm.CreateActor(context.Background(), ws.ID, "agent-1", "agent")
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		root := newRoot()
		root.SetIn(inR)
		root.SetOut(outW)
		root.SetArgs([]string{"--server", c.url, "--token", tok, "mcp"})
		done <- root.ExecuteContext(ctx)
		outW.Close()
	}()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "host", Version: "1"}, nil).Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "session_create", Arguments: map[string]any{"workspace_id": ws.ID, "title": "via stdio"}})
	if err != nil || res.IsError {
		t.Fatalf("session_create: %v %+v", err, res)
	}
	ss, err := adm.ListSessions(context.Background(), ws.ID, client.SessionFilter{})
	if err != nil || len(ss) != 1 || ss[0].Title != "via stdio" {
		t.Fatalf("sessions after the stdio call: %+v %v", ss, err)
	}
	actors, _ := adm.ListActors(context.Background(), ws.ID)
	var agentID string
	for _, a := range actors {
		if a.Name == "agent-1" {
			agentID = a.ID
		}
	}
	if ss[0].Actor != agentID {
		t.Fatalf("the session belongs to %s, want the token's actor %s", ss[0].Actor, agentID)
	}
	cs.Close() // closes stdin: desk mcp ends
	if err := <-done; err != nil {
		t.Fatalf("desk mcp ended with %v", err)
	}
}
