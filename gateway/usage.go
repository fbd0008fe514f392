package gateway

import (
	"bytes"
	"encoding/json"
)

// counts are one call's tokens as the provider reported them, in desk's
// terms: input counts every prompt token (cached ones included), cached
// the part served from the prompt cache.
type counts struct {
	model                 string
	input, output, cached int64
	seen                  bool
}

// maxParse bounds what a non-streamed answer keeps for reading its usage;
// a longer one is forwarded whole but its usage is not read.
const maxParse = 32 << 20

// usageReader reads a provider's answer as it passes to the child: the
// usage of a streamed answer's events (Responses response.completed,
// Chat Completions' last chunk, Anthropic message_start and
// message_delta), or of a whole JSON body.
type usageReader struct {
	provider string
	sse      bool
	line     []byte // an SSE line not yet ended
	body     []byte // a JSON answer so far
	over     bool
	c        counts
}

func (u *usageReader) Write(p []byte) {
	if !u.sse {
		if len(u.body)+len(p) > maxParse {
			u.over = true
			u.body = nil
		}
		if !u.over {
			u.body = append(u.body, p...)
		}
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(u.line)+len(p) <= maxParse {
				u.line = append(u.line, p...)
			}
			return
		}
		u.line = append(u.line, p[:i]...)
		u.event(bytes.TrimRight(u.line, "\r"))
		u.line = u.line[:0]
		p = p[i+1:]
	}
}

// usage returns the counts, once the answer ended.
func (u *usageReader) usage() (counts, bool) {
	if !u.sse && !u.over && len(u.body) > 0 {
		u.object(u.body)
	}
	return u.c, u.c.seen
}

func (u *usageReader) event(line []byte) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return // [DONE] and the like
	}
	u.object(data)
}

// wire are the usage shapes of the three APIs.
type wireUsage struct {
	// OpenAI Responses and Anthropic.
	InputTokens  *int64 `json:"input_tokens"`
	OutputTokens *int64 `json:"output_tokens"`
	// OpenAI Responses.
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	// Chat Completions.
	PromptTokens        *int64 `json:"prompt_tokens"`
	CompletionTokens    *int64 `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	// Anthropic: input_tokens excludes what the cache served or took.
	CacheCreation *int64 `json:"cache_creation_input_tokens"`
	CacheRead     *int64 `json:"cache_read_input_tokens"`
}

type wireObject struct {
	Type     string     `json:"type"`
	Model    string     `json:"model"`
	Usage    *wireUsage `json:"usage"`
	Response *struct {
		Model string     `json:"model"`
		Usage *wireUsage `json:"usage"`
	} `json:"response"`
	Message *struct {
		Model string     `json:"model"`
		Usage *wireUsage `json:"usage"`
	} `json:"message"`
}

func (u *usageReader) object(data []byte) {
	var o wireObject
	if json.Unmarshal(data, &o) != nil {
		return
	}
	switch u.provider {
	case "anthropic":
		// message_start carries the input (and a first output count);
		// message_delta the cumulative output (and, lately, the input
		// again); a whole message its usage.
		if o.Message != nil {
			if o.Message.Model != "" {
				u.c.model = o.Message.Model
			}
			u.anthropic(o.Message.Usage)
		}
		if o.Model != "" {
			u.c.model = o.Model
		}
		u.anthropic(o.Usage)
	default:
		if o.Response != nil {
			// Responses: response.completed (or .incomplete / .failed)
			// carries the whole response with its usage.
			if o.Response.Model != "" {
				u.c.model = o.Response.Model
			}
			u.openai(o.Response.Usage)
			return
		}
		if o.Model != "" {
			u.c.model = o.Model
		}
		u.openai(o.Usage)
	}
}

func (u *usageReader) openai(w *wireUsage) {
	if w == nil {
		return
	}
	switch {
	case w.InputTokens != nil || w.OutputTokens != nil:
		u.c.input, u.c.output, u.c.cached = val(w.InputTokens), val(w.OutputTokens), w.InputTokensDetails.CachedTokens
	case w.PromptTokens != nil || w.CompletionTokens != nil:
		u.c.input, u.c.output, u.c.cached = val(w.PromptTokens), val(w.CompletionTokens), w.PromptTokensDetails.CachedTokens
	default:
		return
	}
	u.c.seen = true
}

func (u *usageReader) anthropic(w *wireUsage) {
	if w == nil {
		return
	}
	if w.InputTokens != nil || w.CacheRead != nil || w.CacheCreation != nil {
		if in := val(w.InputTokens) + val(w.CacheCreation) + val(w.CacheRead); in > 0 || !u.c.seen {
			u.c.input = in
			u.c.cached = val(w.CacheRead)
		}
		u.c.seen = true
	}
	if w.OutputTokens != nil {
		u.c.output = *w.OutputTokens // cumulative in message_delta
		u.c.seen = true
	}
}

func val(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
