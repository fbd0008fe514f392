package provider

import "strings"

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
