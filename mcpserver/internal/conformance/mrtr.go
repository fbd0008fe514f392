package conformance

// The 2026-07-28 fixtures: the diagnostic tools of the stateless scenario
// (SEP-2575), the x-mcp-header tool (SEP-2243) and the multi round-trip
// request tools and prompt (MRTR, SEP-2322) the suite calls by name. The
// handlers are those of the Go SDK's own conformance server
// (github.com/modelcontextprotocol/go-sdk v1.8.0,
// conformance/everything-server/main.go; Copyright 2025 The Go MCP SDK
// Authors, MIT/Apache-2.0), with the package name sdk: the suite fixes
// their exact behaviour, so a rewrite could only differ by mistake.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// addStatelessFixtures registers the 2026-07-28 fixtures on s.
func addStatelessFixtures(s *sdk.Server) {
	// SEP-2243 x-mcp-header tool — arms the http-custom-header-server-validation
	// conformance scenario (which skips when no tool with an x-mcp-header
	// annotation is found).
	sdk.AddTool(s, &sdk.Tool{
		Name:        "test_x_mcp_header",
		Description: "Tests SEP-2243 Mcp-Param-* server-side validation",
		InputSchema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"region": { "type": "string", "description": "mirrored into Mcp-Param-Region", "x-mcp-header": "Region" },
				"level": { "type": "integer", "description": "non-mirrored argument" }
			}
		}`),
	}, testXMcpHeaderHandler)

	// SEP-2575 diagnostic tools used by the stateless conformance scenario.
	sdk.AddTool(s, &sdk.Tool{
		Name:        "test_missing_capability",
		Description: "Requires the sampling client capability; used to verify MissingRequiredClientCapabilityError (-32021) (SEP-2575)",
	}, testMissingCapabilityHandler)

	sdk.AddTool(s, &sdk.Tool{
		Name:        "test_streaming_elicitation",
		Description: "Streams progress notifications while a call is in flight; used to verify response streams carry only notifications, never independent JSON-RPC requests (SEP-2575)",
	}, testStreamingElicitationHandler)

	sdk.AddTool(s, &sdk.Tool{
		Name:        "test_logging_tool",
		Description: "Attempts to emit a log message; the framework must drop it when the client did not set _meta.../logLevel (SEP-2575)",
	}, testLoggingToolHandler)

	sdk.AddTool(s, &sdk.Tool{
		Name:        "test_trigger_tool_change",
		Description: "Mutates the tool list to trigger a notifications/tools/list_changed on active subscription streams (SEP-2575)",
	}, makeTriggerToolChangeHandler(s))

	sdk.AddTool(s, &sdk.Tool{
		Name:        "test_trigger_prompt_change",
		Description: "Mutates the prompt list to trigger a notifications/prompts/list_changed on active subscription streams (SEP-2575)",
	}, makeTriggerPromptChangeHandler(s))

	sdk.AddTool(s, &sdk.Tool{
		Name:        "test_input_required_result_elicitation",
		Description: "MRTR (SEP-2322): asks for the caller name via an in-band elicitation request",
	}, testInputRequiredElicitationHandler)

	sdk.AddTool(s, &sdk.Tool{
		Name:        "test_input_required_result_sampling",
		Description: "MRTR (SEP-2322): asks for an LLM completion via an in-band sampling request",
	}, testInputRequiredSamplingHandler)

	sdk.AddTool(s, &sdk.Tool{
		Name:        "test_input_required_result_list_roots",
		Description: "MRTR (SEP-2322): asks for the client roots via an in-band roots/list request",
	}, testInputRequiredListRootsHandler)

	sdk.AddTool(s, &sdk.Tool{
		Name:        "test_input_required_result_request_state",
		Description: "MRTR (SEP-2322): round-trips integrity-protected requestState alongside an elicitation request",
	}, testInputRequiredRequestStateHandler)

	sdk.AddTool(s, &sdk.Tool{
		Name:        "test_input_required_result_multiple_inputs",
		Description: "MRTR (SEP-2322): asks for elicitation, sampling and roots input in a single round",
	}, testInputRequiredMultipleInputsHandler)

	sdk.AddTool(s, &sdk.Tool{
		Name:        "test_input_required_result_multi_round",
		Description: "MRTR (SEP-2322): two elicitation rounds with evolving requestState before completing",
	}, testInputRequiredMultiRoundHandler)

	sdk.AddTool(s, &sdk.Tool{
		Name:        "test_input_required_result_tampered_state",
		Description: "MRTR (SEP-2322): rejects retries whose requestState fails integrity verification",
	}, testInputRequiredTamperedStateHandler)

	sdk.AddTool(s, &sdk.Tool{
		Name:        "test_input_required_result_capabilities",
		Description: "MRTR (SEP-2322): only requests input kinds the declared client capabilities cover",
	}, testInputRequiredCapabilitiesHandler)

	s.AddPrompt(&sdk.Prompt{Name: "test_input_required_result_prompt", Description: "MRTR (SEP-2322): asks for context via an in-band elicitation request"}, testInputRequiredPromptHandler)
}

type testXMcpHeaderInput struct {
	Region string `json:"region,omitempty"`
	Level  int    `json:"level,omitempty"`
}

func testXMcpHeaderHandler(ctx context.Context, req *sdk.CallToolRequest, input testXMcpHeaderInput) (*sdk.CallToolResult, any, error) {
	return &sdk.CallToolResult{
		Content: []sdk.Content{
			&sdk.TextContent{Text: fmt.Sprintf("region=%s", input.Region)},
		},
	}, nil, nil
}

// testMissingCapabilityHandler requires the client to have declared the
// sampling capability. When absent, it returns a MissingRequiredClientCapabilityError
// with data.requiredCapabilities = {"sampling": {}} per SEP-2575.
func testMissingCapabilityHandler(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	caps := req.ClientCapabilities()
	if caps != nil && caps.Sampling != nil {
		return &sdk.CallToolResult{
			Content: []sdk.Content{
				&sdk.TextContent{Text: "Client declared the sampling capability; tool executed."},
			},
		}, nil, nil
	}
	missingCapabilityData := sdk.MissingRequiredClientCapabilityData{
		RequiredCapabilities: &sdk.ClientCapabilities{
			Sampling: &sdk.SamplingCapabilities{},
		},
	}
	dataBytes, err := json.Marshal(missingCapabilityData)
	if err != nil {
		return nil, nil, err
	}
	return nil, nil, &jsonrpc.Error{
		Code:    sdk.CodeMissingRequiredClientCapabilities,
		Message: "sampling capability required but not declared by client",
		Data:    dataBytes,
	}
}

// testStreamingElicitationHandler returns a plain result. Per SEP-2575, the
// response stream must carry no independent top-level JSON-RPC requests; a
// plain response trivially satisfies this. The scenario declares no
// `elicitation` capability, so this handler must not call req.Session.Elicit.
func testStreamingElicitationHandler(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	return &sdk.CallToolResult{
		Content: []sdk.Content{
			&sdk.TextContent{Text: "stream observed: result frames only, no top-level requests"},
		},
	}, nil, nil
}

// testLoggingToolHandler attempts to emit a log message. The SDK's
// ServerSession.Log gates on the per-request _meta.../logLevel, so this is a
// no-op notification-wise when the client did not opt in.
func testLoggingToolHandler(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	req.Session.Log(ctx, &sdk.LoggingMessageParams{
		Level: "info",
		Data:  "test_logging_tool executed",
	})
	return &sdk.CallToolResult{
		Content: []sdk.Content{
			&sdk.TextContent{Text: "Log attempted; framework gates on _meta.../logLevel."},
		},
	}, nil, nil
}

// makeTriggerToolChangeHandler returns a handler that (re-)registers a
// no-op transient tool. Every call to Server.AddTool dispatches a
// notifications/tools/list_changed to active subscription streams (even when
// it replaces a tool with the same name), which is what the SEP-2575
// subscription checks assert.
func makeTriggerToolChangeHandler(server *sdk.Server) sdk.ToolHandlerFor[any, any] {
	return func(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
		sdk.AddTool(server, &sdk.Tool{
			Name:        "__transient_tool_for_list_changed",
			Description: "Transient tool used to trigger tools/list_changed",
		}, func(context.Context, *sdk.CallToolRequest, any) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{}, nil, nil
		})
		return &sdk.CallToolResult{
			Content: []sdk.Content{
				&sdk.TextContent{Text: "tools_list_changed published"},
			},
		}, nil, nil
	}
}

// makeTriggerPromptChangeHandler is the prompt analogue of
// makeTriggerToolChangeHandler.
func makeTriggerPromptChangeHandler(server *sdk.Server) sdk.ToolHandlerFor[any, any] {
	return func(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
		server.AddPrompt(&sdk.Prompt{
			Name:        "__transient_prompt_for_list_changed",
			Description: "Transient prompt used to trigger prompts/list_changed",
		}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{}, nil
		})
		return &sdk.CallToolResult{
			Content: []sdk.Content{
				&sdk.TextContent{Text: "prompts_list_changed published"},
			},
		}, nil, nil
	}
}

// =============================================================================
// SEP-2322 Multi-Round-Trip helpers
// =============================================================================

// requestStateTamperedSuffix is what the tampered-state conformance scenario
// appends to a valid requestState. Detecting this suffix is sufficient to
// pass the check; a production server would use a real integrity mechanism
// (HMAC / AEAD, per SEP-2322 § "Server Requirements").
const requestStateTamperedSuffix = "-TAMPERED"

// requestStateValid reports whether the state looks like one this server
// minted (i.e. the harness did not append the tampered marker).
func requestStateValid(state string) bool {
	return state != "" && !strings.HasSuffix(state, requestStateTamperedSuffix)
}

// acceptedContent returns the "content" field of an ElicitResult only when the
// user accepted the elicitation. Returns nil if the response is missing, of the
// wrong type, or the action is not "accept".
func acceptedContent(responses sdk.InputResponseMap, key string) map[string]any {
	if responses == nil {
		return nil
	}
	resp, ok := responses[key]
	if !ok {
		return nil
	}
	elicit, ok := resp.(*sdk.ElicitResult)
	if !ok || elicit == nil || elicit.Action != "accept" {
		return nil
	}
	return elicit.Content
}

// =============================================================================
// SEP-2322 Multi-Round-Trip tool handlers
// =============================================================================

// nameElicitSchema is the requestedSchema used by tools that elicit a name.
func nameElicitSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type: "object",
		Properties: map[string]*jsonschema.Schema{
			"name": {Type: "string"},
		},
		Required: []string{"name"},
	}
}

// testInputRequiredElicitationHandler asks for the caller name via elicitation.
// Reused by the result-type, missing-input-response, ignore-extra-params, and
// validate-input scenarios: anything that does not carry an accepted
// "user_name" response is answered with a fresh InputRequiredResult.
func testInputRequiredElicitationHandler(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	if content := acceptedContent(req.Params.InputResponses, "user_name"); content != nil {
		name, _ := content["name"].(string)
		if name != "" {
			return &sdk.CallToolResult{
				Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("Hello, %s!", name)}},
			}, nil, nil
		}
	}
	return &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{
			"user_name": &sdk.ElicitParams{
				Message:         "What is your name?",
				RequestedSchema: nameElicitSchema(),
			},
		},
	}, nil, nil
}

// samplingResponseText extracts the first text content from a sampling
// response. The Go SDK unmarshals responses with a "role" field into
// *CreateMessageWithToolsResult (a superset of the legacy single-content
// CreateMessageResult).
func samplingResponseText(responses sdk.InputResponseMap, key string) (string, bool) {
	resp, ok := responses[key].(*sdk.CreateMessageWithToolsResult)
	if !ok || resp == nil {
		return "", false
	}
	for _, c := range resp.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			return tc.Text, true
		}
	}
	return "(non-text response)", true
}

// testInputRequiredSamplingHandler asks for an LLM completion via sampling.
func testInputRequiredSamplingHandler(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	if text, ok := samplingResponseText(req.Params.InputResponses, "capital_question"); ok {
		return &sdk.CallToolResult{
			Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("Sampling response: %s", text)}},
		}, nil, nil
	}
	return &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{
			"capital_question": &sdk.CreateMessageParams{
				Messages: []*sdk.SamplingMessage{
					{Role: "user", Content: &sdk.TextContent{Text: "What is the capital of France?"}},
				},
				MaxTokens: 100,
			},
		},
	}, nil, nil
}

// testInputRequiredListRootsHandler asks for the client roots.
func testInputRequiredListRootsHandler(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	if resp, ok := req.Params.InputResponses["client_roots"].(*sdk.ListRootsResult); ok && resp != nil {
		var uris []string
		for _, r := range resp.Roots {
			uris = append(uris, r.URI)
		}
		return &sdk.CallToolResult{
			Content: []sdk.Content{
				&sdk.TextContent{Text: fmt.Sprintf("Client exposed %d root(s): %s", len(resp.Roots), strings.Join(uris, ", "))},
			},
		}, nil, nil
	}
	return &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{
			"client_roots": &sdk.ListRootsParams{},
		},
	}, nil, nil
}

// testInputRequiredRequestStateHandler round-trips an opaque requestState
// alongside an elicitation request.
func testInputRequiredRequestStateHandler(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	if content := acceptedContent(req.Params.InputResponses, "confirm"); content != nil {
		if requestStateValid(req.Params.RequestState) {
			return &sdk.CallToolResult{
				Content: []sdk.Content{&sdk.TextContent{Text: "state-ok: requestState received and confirmation accepted"}},
			}, nil, nil
		}
		return nil, nil, &jsonrpc.Error{
			Code:    jsonrpc.CodeInvalidParams,
			Message: "invalid requestState",
		}
	}
	return &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{
			"confirm": &sdk.ElicitParams{
				Message: "Please confirm",
				RequestedSchema: &jsonschema.Schema{
					Type:       "object",
					Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean"}},
					Required:   []string{"ok"},
				},
			},
		},
		RequestState: "request_state",
	}, nil, nil
}

// testInputRequiredMultipleInputsHandler asks for elicitation, sampling, and
// roots input in a single round.
func testInputRequiredMultipleInputsHandler(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	nameContent := acceptedContent(req.Params.InputResponses, "user_name")
	name, _ := nameContent["name"].(string)

	greetingText, hasGreeting := samplingResponseText(req.Params.InputResponses, "greeting")

	var rootsCount int
	rootsResp, rootsOK := req.Params.InputResponses["client_roots"].(*sdk.ListRootsResult)
	if rootsOK && rootsResp != nil {
		rootsCount = len(rootsResp.Roots)
	}

	if name != "" && hasGreeting && rootsOK {
		return &sdk.CallToolResult{
			Content: []sdk.Content{
				&sdk.TextContent{Text: fmt.Sprintf("%s %s — %d root(s) visible", greetingText, name, rootsCount)},
			},
		}, nil, nil
	}
	return &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{
			"user_name": &sdk.ElicitParams{
				Message:         "What is your name?",
				RequestedSchema: nameElicitSchema(),
			},
			"greeting": &sdk.CreateMessageParams{
				Messages: []*sdk.SamplingMessage{
					{Role: "user", Content: &sdk.TextContent{Text: "Generate a greeting"}},
				},
				MaxTokens: 50,
			},
			"client_roots": &sdk.ListRootsParams{},
		},
		RequestState: "multiple_inputs",
	}, nil, nil
}

// testInputRequiredMultiRoundHandler runs two elicitation rounds with
// evolving requestState before completing. The round number (and the name
// elicited in round 1) lives in the state, since the stateless server keeps
// no per-session memory.
func testInputRequiredMultiRoundHandler(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	state := req.Params.RequestState
	// State format: "round=1" or "round=2;name=<name>".
	switch {
	case state == "":
		return &sdk.CallToolResult{
			InputRequests: sdk.InputRequestMap{
				"step1": &sdk.ElicitParams{
					Message:         "Step 1: What is your name?",
					RequestedSchema: nameElicitSchema(),
				},
			},
			RequestState: "round=1",
		}, nil, nil
	case state == "round=1":
		name, _ := acceptedContent(req.Params.InputResponses, "step1")["name"].(string)
		if name == "" {
			name = "unknown"
		}
		return &sdk.CallToolResult{
			InputRequests: sdk.InputRequestMap{
				"step2": &sdk.ElicitParams{
					Message: "Step 2: What is your favorite color?",
					RequestedSchema: &jsonschema.Schema{
						Type:       "object",
						Properties: map[string]*jsonschema.Schema{"color": {Type: "string"}},
						Required:   []string{"color"},
					},
				},
			},
			RequestState: "round=2;name=" + name,
		}, nil, nil
	default:
		color, _ := acceptedContent(req.Params.InputResponses, "step2")["color"].(string)
		if color == "" {
			color = "unknown"
		}
		name := strings.TrimPrefix(state, "round=2;name=")
		return &sdk.CallToolResult{
			Content: []sdk.Content{
				&sdk.TextContent{Text: fmt.Sprintf("Multi-round complete: %s likes %s", name, color)},
			},
		}, nil, nil
	}
}

// testInputRequiredTamperedStateHandler rejects retries whose requestState
// looks tampered. The conformance harness tampers by appending "-TAMPERED";
// production servers should use a real integrity mechanism (HMAC / AEAD).
func testInputRequiredTamperedStateHandler(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	if req.Params.RequestState != "" {
		if !requestStateValid(req.Params.RequestState) {
			return nil, nil, &jsonrpc.Error{
				Code:    jsonrpc.CodeInvalidParams,
				Message: "invalid requestState: tampered",
			}
		}
		if acceptedContent(req.Params.InputResponses, "confirm") != nil {
			return &sdk.CallToolResult{
				Content: []sdk.Content{&sdk.TextContent{Text: "state-ok: requestState received and confirmation accepted"}},
			}, nil, nil
		}
	}
	return &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{
			"confirm": &sdk.ElicitParams{
				Message: "Please confirm",
				RequestedSchema: &jsonschema.Schema{
					Type:       "object",
					Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean"}},
					Required:   []string{"ok"},
				},
			},
		},
		RequestState: "tampered_state",
	}, nil, nil
}

// testInputRequiredCapabilitiesHandler only requests input kinds the client
// declared capabilities cover. Reads capabilities from the per-request
// _meta["io.modelcontextprotocol/clientCapabilities"] envelope.
func testInputRequiredCapabilitiesHandler(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	if len(req.Params.InputResponses) > 0 {
		return &sdk.CallToolResult{
			Content: []sdk.Content{&sdk.TextContent{Text: "Capability-aware input requests fulfilled"}},
		}, nil, nil
	}
	caps := req.ClientCapabilities()
	reqs := sdk.InputRequestMap{}
	if caps != nil && caps.Elicitation != nil {
		reqs["user_name"] = &sdk.ElicitParams{
			Message:         "What is your name?",
			RequestedSchema: nameElicitSchema(),
		}
	}
	if caps != nil && caps.Sampling != nil {
		reqs["greeting"] = &sdk.CreateMessageParams{
			Messages: []*sdk.SamplingMessage{
				{Role: "user", Content: &sdk.TextContent{Text: "Generate a short greeting"}},
			},
			MaxTokens: 50,
		}
	}
	if caps != nil && (caps.RootsV2 != nil || caps.Roots.ListChanged) {
		reqs["client_roots"] = &sdk.ListRootsParams{}
	}
	if len(reqs) == 0 {
		return &sdk.CallToolResult{
			Content: []sdk.Content{&sdk.TextContent{Text: "No declared client capability supports an in-band input request"}},
		}, nil, nil
	}
	return &sdk.CallToolResult{InputRequests: reqs}, nil, nil
}

// testInputRequiredPromptHandler is the prompts/get analogue: elicits context
// on the first call and returns a GetPromptResult with messages on retry.
func testInputRequiredPromptHandler(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
	if content := acceptedContent(req.Params.InputResponses, "user_context"); content != nil {
		contextStr, _ := content["context"].(string)
		return &sdk.GetPromptResult{
			Description: "A prompt with elicited context",
			Messages: []*sdk.PromptMessage{
				{
					Role:    "user",
					Content: &sdk.TextContent{Text: fmt.Sprintf("Context: %s", contextStr)},
				},
			},
		}, nil
	}
	return &sdk.GetPromptResult{
		InputRequests: sdk.InputRequestMap{
			"user_context": &sdk.ElicitParams{
				Message: "Please provide context for the prompt",
				RequestedSchema: &jsonschema.Schema{
					Type:       "object",
					Properties: map[string]*jsonschema.Schema{"context": {Type: "string"}},
					Required:   []string{"context"},
				},
			},
		},
	}, nil
}
