package httpapi

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/desk-runtime/desk/classify"
	"os"
)

// The component schemas live in openapi/*.json, one file per area of the
// API, merged here into one components.schemas object. The files are
// generated from the Go types listed in schemas.go, never edited by hand:
// TestOpenAPIComponents fails when they differ from what the types give.
//
//go:generate go test -run ^TestOpenAPIComponents$ -update .
//go:embed openapi/*.json
var componentFiles embed.FS

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// paramDocs describes path parameters by name.
var paramDocs = map[string]string{
	"ws":   "workspace id (ws_…)",
	"id":   "cell id: the workspace id (ws_…), as the Wesclaw routes name it",
	"ses":  "session id (ses_…)",
	"art":  "artifact id (art_…)",
	"grp":  "selection group id (grp_…)",
	"item": "item id (itm_…)",
	"exe":  "execution id (exe_…)",
	"q":    "queue item id (q_…)",
	"srf":  "surface id (srf_…)",
	"blk":  "block id (blk_…)",
	"apr":  "approval id (apr_…)",
	"inp":  "input request id (inp_…)",
	"pln":  "plan id (pln_…)",
	"name": "runtime name",
	"msg":  "message id (msg_…)",
	"thr":  "thread id (thr_…)",
	"rtn":  "routine id (rtn_…)",
	"dsp":  "dispatch id (dsp_…)",
	"whk":  "webhook id (whk_…)",
	"whd":  "webhook delivery id (whd_…)",
}

// OpenAPI builds the OpenAPI 3.1 document of every route in the table.
func (s *Server) OpenAPI() map[string]any {
	comps := map[string]any{}
	files, _ := fs.Glob(componentFiles, "openapi/*.json")
	for _, name := range files {
		b, _ := componentFiles.ReadFile(name)
		var part map[string]any
		if err := json.Unmarshal(b, &part); err != nil {
			panic("httpapi: bad " + name + ": " + err.Error())
		}
		for k, v := range part {
			if _, dup := comps[k]; dup {
				panic("httpapi: schema " + k + " defined twice (" + name + ")")
			}
			comps[k] = v
		}
	}
	paths := map[string]any{}
	for _, rt := range s.routes() {
		op := map[string]any{
			"operationId": operationID(rt),
			"summary":     rt.Summary,
			"tags":        []string{rt.Tag},
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(rt.Path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true,
				"description": paramDocs[m[1]], "schema": map[string]any{"type": "string"}})
		}
		for _, q := range rt.Query {
			params = append(params, map[string]any{"name": q.Name, "in": "query", "required": q.Required,
				"description": q.Doc, "schema": map[string]any{"type": q.Type}})
		}
		if params != nil {
			op["parameters"] = params
		}
		switch rt.Body {
		case "":
		case "binary":
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				"application/octet-stream": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}}
		default:
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				"application/json": map[string]any{"schema": ref(rt.Body)}}}
		}
		resp := map[string]any{"description": http.StatusText(rt.Status)}
		switch rt.Resp {
		case "":
		case "NDJSON":
			resp["content"] = map[string]any{"application/x-ndjson": map[string]any{"schema": ref(rt.Resp)}}
		case "EventStream", "AGUIEventStream":
			resp["content"] = map[string]any{"text/event-stream": map[string]any{"schema": ref(rt.Resp)}}
		case "binary":
			resp["content"] = map[string]any{"application/octet-stream": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
		default:
			resp["content"] = map[string]any{"application/json": map[string]any{"schema": ref(rt.Resp)}}
		}
		op["responses"] = map[string]any{
			strconv.Itoa(rt.Status): resp,
			"default": map[string]any{"description": "An error; see the code for what went wrong.",
				"content": map[string]any{"application/json": map[string]any{"schema": ref("Error")}}},
		}
		if !rt.Public {
			op["security"] = []any{map[string]any{"bearer": []any{}}}
		} else {
			op["security"] = []any{}
		}
		p, _ := paths[rt.Path].(map[string]any)
		if p == nil {
			p = map[string]any{}
			paths[rt.Path] = p
		}
		p[strings.ToLower(rt.Method)] = op
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "desk",
			"version":     s.Version,
			"description": "desk is a durable workspace runtime for AI agents. Every route but /healthz needs Authorization: Bearer <token>. Errors are {\"error\":{\"code\",\"message\"}}; codes map to statuses invalid 400, unauthorized 401, forbidden 403, not_found 404, conflict 409, busy 409, too_large 413, request_timeout 408, unavailable 503, insufficient_storage 507, internal 500.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas":         comps,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

// operationID derives a stable id such as "POST /v1/sessions/{ses}/artifacts"
// → "post_sessions_ses_artifacts".
func operationID(rt route) string {
	p := strings.TrimPrefix(rt.Path, "/v1")
	p = strings.NewReplacer("{", "", "}", "", ".", "_", "-", "_").Replace(p)
	return strings.ToLower(rt.Method) + strings.ReplaceAll(p, "/", "_")
}

var openapiOnce struct {
	sync.Once
	b []byte
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) error {
	openapiOnce.Do(func() { openapiOnce.b, _ = json.Marshal(s.OpenAPI()) })
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openapiOnce.b)
	return err
}

// guestMediaType classifies a guest file from its head so the browser gets
// an honest type; the bytes, not the name, decide.
func guestMediaType(name string, f *os.File, size int64) string {
	res, err := classify.Classify(name, "", f, size)
	if err != nil {
		return "application/octet-stream"
	}
	return res.MediaType
}
