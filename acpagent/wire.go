package acpagent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// JSON-RPC error codes the gate answers itself.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeInvalidParams  = -32602
)

// DefaultMaxMessageBytes bounds one incoming JSON-RPC message (one line).
// It is below the SDK's own 10 MiB line limit, which ends the connection
// when exceeded; the gate answers a larger message with an error instead
// and goes on serving.
const DefaultMaxMessageBytes = 4 << 20

// idPrefixBytes is how much of an oversized message the gate keeps to find
// its id, so the error can answer the request that caused it.
const idPrefixBytes = 64 << 10

// lockedWriter makes each Write atomic: the SDK and the gate both write
// whole messages to the same stdout.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// gate reads newline-delimited JSON-RPC from in and passes every
// well-formed message on to next (the SDK's connection). The SDK drops a
// line it cannot parse without answering and ends the connection on a line
// longer than its buffer; the gate answers those itself, as JSON-RPC
// requires — parse error, invalid request, too large — and the connection
// goes on. It returns when in ends or next is closed.
func gate(in io.Reader, next io.Writer, out io.Writer, max int, log *slog.Logger) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, size, err := readLine(r, max)
		if len(bytes.TrimSpace(line)) > 0 || size > max {
			if size > max {
				id := idOf(line)
				log.Warn("refused an oversized message", "bytes", size, "limit", max)
				writeError(out, id, codeInvalidRequest, fmt.Sprintf("Invalid request: message of %d bytes is larger than the %d bytes desk acp accepts", size, max))
			} else if id, code, msg := check(line); code != 0 {
				log.Warn("refused a malformed message", "code", code, "reason", msg)
				if code == codeParseError || id != nil {
					writeError(out, id, code, msg)
				}
			} else if _, werr := next.Write(append(bytes.TrimSpace(line), '\n')); werr != nil {
				return werr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// readLine reads one line; when it is longer than max it keeps only its
// first idPrefixBytes and reports the whole size.
func readLine(r *bufio.Reader, max int) ([]byte, int, error) {
	var line []byte
	size := 0
	for {
		chunk, err := r.ReadSlice('\n')
		size += len(chunk)
		if size <= max {
			line = append(line, chunk...)
		} else if len(line) < idPrefixBytes {
			line = append(line, chunk[:min(len(chunk), idPrefixBytes-len(line))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if n := len(chunk); err == nil && n > 0 {
			size-- // the newline is not part of the message
		}
		return line, size, err
	}
}

// check refuses what is not one JSON-RPC 2.0 message: unparseable JSON
// (parse error), a batch, a wrong jsonrpc version, an id that is not a
// string, number or null, a method that is not a string, a message that is
// neither request nor response (invalid request), and params that are not
// structured (invalid params). It returns the message's id (nil for none
// or one that cannot be used) and 0 when the message is fine.
func check(line []byte) (json.RawMessage, int, string) {
	line = bytes.TrimSpace(line)
	if !json.Valid(line) {
		return nil, codeParseError, "Parse error: the message is not valid JSON"
	}
	if line[0] != '{' {
		if line[0] == '[' {
			return json.RawMessage("null"), codeInvalidRequest, "Invalid request: batches are not supported"
		}
		return json.RawMessage("null"), codeInvalidRequest, "Invalid request: a message must be a JSON object"
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return json.RawMessage("null"), codeInvalidRequest, "Invalid request: " + err.Error()
	}
	id, hasID := m["id"]
	if hasID && !validID(id) {
		return json.RawMessage("null"), codeInvalidRequest, "Invalid request: id must be a string, a number or null"
	}
	if !hasID {
		id = nil
	}
	if string(m["jsonrpc"]) != `"2.0"` {
		return orNull(id, hasID), codeInvalidRequest, `Invalid request: jsonrpc must be "2.0"`
	}
	method, hasMethod := m["method"]
	if !hasMethod {
		_, res := m["result"]
		_, rerr := m["error"]
		if hasID && (res || rerr) {
			return nil, 0, "" // a response to one of our requests
		}
		return orNull(id, hasID), codeInvalidRequest, "Invalid request: a request needs a method"
	}
	var name string
	if json.Unmarshal(method, &name) != nil || name == "" {
		return orNull(id, hasID), codeInvalidRequest, "Invalid request: method must be a non-empty string"
	}
	if p, ok := m["params"]; ok {
		if t := firstByte(p); t != '{' && t != '[' && string(bytes.TrimSpace(p)) != "null" {
			return id, codeInvalidParams, "Invalid params: params must be an object"
		}
	}
	return nil, 0, ""
}

func orNull(id json.RawMessage, has bool) json.RawMessage {
	if has {
		return id
	}
	return json.RawMessage("null")
}

func firstByte(b json.RawMessage) byte {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

func validID(id json.RawMessage) bool {
	switch t := firstByte(id); {
	case t == '"', t == '-', t >= '0' && t <= '9':
		return true
	default:
		return string(bytes.TrimSpace(id)) == "null"
	}
}

// idOf finds the top-level id in the kept prefix of an oversized message
// (clients write it before the params); null when it is not there.
func idOf(prefix []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return json.RawMessage("null")
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			break
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		if k == "id" && validID(v) {
			return v
		}
	}
	return json.RawMessage("null")
}

func writeError(out io.Writer, id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	_, _ = out.Write(append(b, '\n'))
}
