package provider

import (
	"strings"
	"unicode/utf8"
)

// Per-message and per-tool overheads of the chat formats (role markers,
// separators, the tool wrapper), in tokens. Rough, on the high side.
const (
	messageOverhead = 4
	toolOverhead    = 8
)

// EstimateTokens is a quick, provider-independent estimate of the input
// tokens of req: about four bytes of ASCII per token and one token per
// other character (CJK text is near one token a character; accented Latin
// is less, so the estimate errs high). It is meant for a context budget
// before a call; after a call, Response.Usage is exact.
func EstimateTokens(req Request) int {
	n := EstimateTextTokens(req.System)
	for _, m := range req.Messages {
		n += messageOverhead + EstimateTextTokens(m.Content)
		for _, c := range m.ToolCalls {
			n += messageOverhead + EstimateTextTokens(c.Name) + EstimateTextTokens(string(c.Arguments))
		}
		n += EstimateTextTokens(m.ToolCallID)
	}
	for _, t := range req.Tools {
		n += toolOverhead + EstimateTextTokens(t.Name) + EstimateTextTokens(t.Description) + EstimateTextTokens(string(t.Parameters))
	}
	return n
}

// EstimateTextTokens estimates the tokens of one text (see EstimateTokens).
func EstimateTextTokens(s string) int {
	if s == "" {
		return 0
	}
	ascii, other := 0, 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			ascii++
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		other++
		i += size
	}
	return (ascii+3)/4 + other
}

// ContextWindowFor looks model up in table by longest matching prefix
// (case-insensitive, ignoring a "vendor/" prefix such as
// "openai/gpt-4o"), and returns def when nothing matches.
func ContextWindowFor(table map[string]int, model string, def int) int {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndex(m, "/"); i >= 0 {
		m = m[i+1:]
	}
	best, n := -1, def
	for prefix, size := range table {
		if strings.HasPrefix(m, prefix) && len(prefix) > best {
			best, n = len(prefix), size
		}
	}
	return n
}
