package mcpserver

import (
	"context"
	"errors"
	"io"

	"github.com/desk-runtime/desk/client"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// RunStdio serves one MCP session over in and out (newline-delimited
// JSON-RPC, the stdio transport) until the host closes in or ctx ends.
// Every call goes to desk through c, over the network.
func RunStdio(ctx context.Context, c *client.Client, in io.Reader, out io.Writer, o Options) error {
	b := newBackend(func(*sdk.RequestExtra) *client.Client { return c }, o)
	err := b.srv.Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}})
	// The session ended: its resource followers stop; wait for them.
	return errors.Join(err, b.wait(context.WithoutCancel(ctx)))
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
