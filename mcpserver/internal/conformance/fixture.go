// Package conformance is the fixture server the official MCP conformance
// suite (@modelcontextprotocol/conformance) is run against for its tool,
// resource and prompt scenarios, which expect fixtures of their own
// (test_simple_text, test://static-text, test_simple_prompt, …). The
// fixtures are served through desk's own MCP transport (mcpserver.Transport:
// Origin validation, bearer authentication, sessions, the JSON-RPC error
// contract for bad input) and desk's progress and logging helpers, so the
// suite checks that code and not a copy of it. desk's real endpoint is
// checked by the suite's lifecycle, transport and DNS-rebinding scenarios.
//
// The package is internal and only tests import it: desk serve never
// serves these fixtures.
package conformance

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/mcpserver"
	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// WatchedURI is the resource the fixture reports as changed every few
// seconds, for the subscription scenarios.
const WatchedURI = "test://watched-resource"

// Handler serves the fixtures at any path, accepting only token. It stops
// its background work when ctx ends; closeSessions ends the MCP sessions
// the suite left open, so nothing of the fixture outlives its test.
func Handler(ctx context.Context, token string, logger *slog.Logger) (h http.Handler, closeSessions func()) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "desk-conformance-fixtures", Version: "1.0.0"}, &sdk.ServerOptions{
		Logger: logger,
		CompletionHandler: func(context.Context, *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
			return &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: []string{}}}, nil
		},
		SubscribeHandler:   func(context.Context, *sdk.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
		Capabilities: &sdk.ServerCapabilities{
			Logging: &sdk.LoggingCapabilities{}, Completions: &sdk.CompletionCapabilities{},
			Resources: &sdk.ResourceCapabilities{Subscribe: true}, Tools: &sdk.ToolCapabilities{}, Prompts: &sdk.PromptCapabilities{},
		},
	})
	addTools(srv)
	addResources(srv)
	addPrompts(srv)
	addStatelessFixtures(srv)
	go func() {
		t := time.NewTicker(3 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: WatchedURI})
			}
		}
	}()
	e := mcpserver.Transport(func(*http.Request) *sdk.Server { return srv }, mcpserver.TransportOptions{
		Verify: func(_ context.Context, tok string) error {
			if tok != token {
				return desk.Errorf(desk.EUNAUTHORIZED, "unknown token")
			}
			return nil
		},
		Logger: logger,
	})
	return e, func() { _ = e.Close(context.Background()) }
}

// The suite's own 1×1 PNG and silent WAV.
var (
	pngData, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
	wavData, _ = base64.StdEncoding.DecodeString("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=")
)

type none struct{}

func textResult(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

func fixed(name, desc string, res func() *sdk.CallToolResult) (*sdk.Tool, sdk.ToolHandlerFor[none, any]) {
	return &sdk.Tool{Name: name, Description: desc}, func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
		return res(), nil, nil
	}
}

func addTools(s *sdk.Server) {
	add := func(t *sdk.Tool, h sdk.ToolHandlerFor[none, any]) { sdk.AddTool(s, t, h) }
	add(fixed("test_simple_text", "Returns simple text", func() *sdk.CallToolResult {
		return textResult("This is a simple text response for testing.")
	}))
	add(fixed("test_image_content", "Returns an image", func() *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{Data: pngData, MIMEType: "image/png"}}}
	}))
	add(fixed("test_audio_content", "Returns audio", func() *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.AudioContent{Data: wavData, MIMEType: "audio/wav"}}}
	}))
	add(fixed("test_embedded_resource", "Returns an embedded resource", func() *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource"}}}}
	}))
	add(fixed("test_multiple_content_types", "Returns text, an image and a resource", func() *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "This is text content"},
			&sdk.ImageContent{Data: pngData, MIMEType: "image/png"},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "test://embedded-in-multiple", MIMEType: "text/plain", Text: "This is an embedded resource"}},
		}}
	}))
	add(&sdk.Tool{Name: "test_tool_with_logging", Description: "Logs three messages while it runs"},
		func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			log := mcpserver.SessionLogger(req.Session)
			for i, m := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
				if i > 0 {
					time.Sleep(50 * time.Millisecond)
				}
				log.InfoContext(ctx, m)
			}
			return textResult("Tool with logging executed successfully"), nil, nil
		})
	add(&sdk.Tool{Name: "test_tool_with_progress", Description: "Reports progress 0, 50 and 100 of 100"},
		func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			p := mcpserver.NewProgress(req)
			for _, n := range []float64{0, 50, 100} {
				p.Report(ctx, fmt.Sprintf("Completed step %.0f of 100", n), n, 100)
				time.Sleep(50 * time.Millisecond)
			}
			return textResult(fmt.Sprint(req.Params.GetProgressToken())), nil, nil
		})
	add(&sdk.Tool{Name: "test_error_handling", Description: "Always fails"},
		func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			return nil, nil, errors.New("This tool intentionally returns an error for testing")
		})
	add(&sdk.Tool{Name: "test_reconnection", Description: "Closes its SSE stream mid-call; the result arrives after the client reconnects"},
		func(_ context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			if req.Extra != nil && req.Extra.CloseSSEStream != nil {
				req.Extra.CloseSSEStream(sdk.CloseSSEStreamArgs{RetryAfter: 10 * time.Millisecond})
			}
			time.Sleep(100 * time.Millisecond)
			return textResult("Reconnection test completed successfully."), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "test_sampling", Description: "Asks the client's model"},
		func(ctx context.Context, req *sdk.CallToolRequest, in struct {
			Prompt string `json:"prompt"`
		}) (*sdk.CallToolResult, any, error) {
			res, err := req.Session.CreateMessage(ctx, &sdk.CreateMessageParams{MaxTokens: 100,
				Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: in.Prompt}}}})
			if err != nil {
				return nil, nil, fmt.Errorf("sampling failed: %w", err)
			}
			text := "(non-text response)"
			if tc, ok := res.Content.(*sdk.TextContent); ok {
				text = tc.Text
			}
			return textResult("LLM response: " + text), nil, nil
		})
	elicit := func(name string, schema func(string) any) {
		sdk.AddTool(s, &sdk.Tool{Name: name, Description: "Asks the user through the client"},
			func(ctx context.Context, req *sdk.CallToolRequest, in struct {
				Message string `json:"message,omitempty"`
			}) (*sdk.CallToolResult, any, error) {
				msg := in.Message
				if msg == "" {
					msg = "Please answer"
				}
				res, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Message: msg, RequestedSchema: schema(msg)})
				if err != nil {
					return nil, nil, fmt.Errorf("elicitation failed: %w", err)
				}
				b, _ := json.Marshal(res.Content)
				return textResult(fmt.Sprintf("Elicitation result: action=%s, content=%s", res.Action, b)), nil, nil
			})
	}
	elicit("test_elicitation", func(string) any {
		return &jsonschema.Schema{Type: "object", Required: []string{"username"},
			Properties: map[string]*jsonschema.Schema{"username": {Type: "string", Description: "Your preferred username"}}}
	})
	elicit("test_elicitation_sep1034_defaults", func(string) any {
		return map[string]any{"type": "object", "properties": map[string]any{
			"name":     map[string]any{"type": "string", "description": "User name", "default": "John Doe"},
			"age":      map[string]any{"type": "integer", "description": "User age", "default": 30},
			"score":    map[string]any{"type": "number", "description": "User score", "default": 95.5},
			"status":   map[string]any{"type": "string", "description": "User status", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
			"verified": map[string]any{"type": "boolean", "description": "Verification status", "default": true},
		}}
	})
	elicit("test_elicitation_sep1330_enums", func(string) any {
		titled := []map[string]any{{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}}
		return map[string]any{"type": "object", "properties": map[string]any{
			"untitledSingle": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}},
			"titledSingle":   map[string]any{"type": "string", "oneOf": titled},
			"legacyEnum":     map[string]any{"type": "string", "enum": []string{"opt1", "opt2", "opt3"}, "enumNames": []string{"Option One", "Option Two", "Option Three"}},
			"untitledMulti":  map[string]any{"type": "array", "minItems": 1, "maxItems": 3, "items": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}}},
			"titledMulti":    map[string]any{"type": "array", "minItems": 1, "maxItems": 3, "items": map[string]any{"type": "string", "anyOf": titled}},
		}}
	})
	sdk.AddTool(s, &sdk.Tool{Name: "json_schema_2020_12_tool", Description: "Has a JSON Schema 2020-12 input schema",
		InputSchema: json.RawMessage(`{
			"$schema": "https://json-schema.org/draft/2020-12/schema",
			"type": "object",
			"$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
			"properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
			"additionalProperties": false
		}`)},
		func(_ context.Context, _ *sdk.CallToolRequest, in json.RawMessage) (*sdk.CallToolResult, any, error) {
			return textResult("JSON Schema 2020-12 tool called with: " + string(in)), nil, nil
		})
}

func addResources(s *sdk.Server) {
	text := func(uri, mt, body string) *sdk.ReadResourceResult {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: mt, Text: body}}}
	}
	s.AddResource(&sdk.Resource{Name: "static-text", URI: "test://static-text", MIMEType: "text/plain", Description: "A static text resource"},
		func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return text(req.Params.URI, "text/plain", "This is the content of the static text resource."), nil
		})
	s.AddResource(&sdk.Resource{Name: "static-binary", URI: "test://static-binary", MIMEType: "image/png", Description: "A static image"},
		func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "image/png", Blob: pngData}}}, nil
		})
	s.AddResourceTemplate(&sdk.ResourceTemplate{Name: "template", URITemplate: "test://template/{id}/data", MIMEType: "application/json", Description: "A template with an id"},
		func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			id := strings.TrimSuffix(strings.TrimPrefix(req.Params.URI, "test://template/"), "/data")
			b, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			return text(req.Params.URI, "application/json", string(b)), nil
		})
	s.AddResource(&sdk.Resource{Name: "watched-resource", URI: WatchedURI, MIMEType: "text/plain", Description: "Changes every 3 seconds"},
		func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return text(req.Params.URI, "text/plain", "Watched resource content"), nil
		})
}

func addPrompts(s *sdk.Server) {
	user := func(c sdk.Content) *sdk.PromptMessage { return &sdk.PromptMessage{Role: "user", Content: c} }
	s.AddPrompt(&sdk.Prompt{Name: "test_simple_prompt", Title: "Simple Test Prompt", Description: "A prompt without arguments"},
		func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{user(&sdk.TextContent{Text: "This is a simple prompt for testing."})}}, nil
		})
	s.AddPrompt(&sdk.Prompt{Name: "test_prompt_with_arguments", Title: "Prompt With Arguments", Description: "A prompt with two arguments",
		Arguments: []*sdk.PromptArgument{{Name: "arg1", Description: "First test argument", Required: true}, {Name: "arg2", Description: "Second test argument", Required: true}}},
		func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			a := req.Params.Arguments
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{user(&sdk.TextContent{
				Text: fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])})}}, nil
		})
	s.AddPrompt(&sdk.Prompt{Name: "test_prompt_with_embedded_resource", Title: "Prompt With Embedded Resource", Description: "Embeds a resource",
		Arguments: []*sdk.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{
				user(&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: req.Params.Arguments["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing."}}),
				user(&sdk.TextContent{Text: "Please process the embedded resource above."}),
			}}, nil
		})
	s.AddPrompt(&sdk.Prompt{Name: "test_prompt_with_image", Title: "Prompt With Image", Description: "Includes an image"},
		func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{
				user(&sdk.ImageContent{Data: pngData, MIMEType: "image/png"}),
				user(&sdk.TextContent{Text: "Please analyze the image above."}),
			}}, nil
		})
}
