package applog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Redacted replaces every secret the Redactor finds.
const Redacted = "[REDACTED]"

// MinSecretLen is the shortest configured secret the Redactor replaces;
// shorter values would shred ordinary text and are ignored.
const MinSecretLen = 4

// Bounds on what one entry may hold. Truncation happens after redaction, so
// it can never cut a secret short enough to slip past a pattern.
const (
	maxMessageBytes = 16 << 10
	maxStringBytes  = 8 << 10
	maxAnyJSONBytes = 64 << 10
)

// Redactor replaces secrets in text and structured values: configured secret
// values wherever they occur, values of sensitive keys (password, token,
// apiKey, cookie, authorization …), and text shaped like credentials (bearer
// tokens, desk tokens, provider API keys, URL passwords, private keys). It
// errs on the side of replacing too much; ordinary paths and ids stay.
//
// A Redactor is safe for concurrent use, and redacting twice changes
// nothing more.
type Redactor struct {
	mu      sync.Mutex
	secrets []string
	// repl replaces the configured secrets; nil while there are none.
	repl atomic.Pointer[strings.Replacer]
}

// NewRedactor returns a Redactor that also replaces the given secrets.
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		r.AddSecret(s)
	}
	return r
}

// AddSecret makes r replace s, and its URL-encoded form, from now on.
// Values shorter than MinSecretLen are ignored.
func (r *Redactor) AddSecret(s string) {
	if len(s) < MinSecretLen {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	forms := []string{s}
	if q := url.QueryEscape(s); q != s {
		forms = append(forms, q)
	}
	if p := url.PathEscape(s); p != s && p != forms[len(forms)-1] {
		forms = append(forms, p)
	}
	for _, f := range forms {
		if !containsString(r.secrets, f) {
			r.secrets = append(r.secrets, f)
		}
	}
	// Longest first, so a secret that contains another is replaced whole.
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	pairs := make([]string, 0, 2*len(r.secrets))
	for _, sec := range r.secrets {
		pairs = append(pairs, sec, Redacted)
	}
	r.repl.Store(strings.NewReplacer(pairs...))
}

func containsString(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// A keyed rule keeps its key and separator (groups 1 and 2) and replaces the
// value (group 3), keeping the value's quotes.
var keyedRules = []*regexp.Regexp{
	// Header-shaped: Authorization and cookies run to the end of the line,
	// since their values contain spaces, commas and semicolons.
	regexp.MustCompile(`(?i)\b((?:proxy-)?authorization|set-cookie|cookie)(\\?["']?[ \t]*[:=][ \t]*)("(?:[^"\\]|\\.)*"|'[^']*'|[^\r\n]+)`),
	// key=value, key: value and "key":"value" (also JSON escaped inside a
	// string, as %q prints it) for keys that end in a sensitive word
	// (db.password, x-api-key, access_token, clientSecret).
	regexp.MustCompile(`(?i)\b([\w.\-]*?(?:password|passwd|passphrase|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|credentials?))(\\?["']?[ \t]*[:=][ \t]*)("(?:[^"\\]|\\.)*"|'[^']*'|\\"(?:[^"\\]|\\[^"])*\\"|[^\s,;&"']+)`),
	// Bearer credentials anywhere, with or without a header name.
	regexp.MustCompile(`(?i)\b(bearer)(\s+)()[A-Za-z0-9\-._~+/]+=*`),
	// Passwords in URL userinfo: scheme://user:password@host.
	regexp.MustCompile(`\b([A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@]*)(:)([^\s/@]+)@`),
}

// tokenShapes are credentials recognizable on their own; the whole match is
// replaced.
var tokenShapes = regexp.MustCompile(strings.Join([]string{
	`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)`,
	`\bdesk(?:adm|link|web)?_[a-z2-7]{32,}`,                           // desk actor and admin tokens, login-link codes, browser session ids
	`\bsk-(?:ant|proj|svcacct|admin)-[A-Za-z0-9_\-]{16,}`,             // Anthropic, OpenAI project keys
	`\bsk-[A-Za-z0-9]{20,}`,                                           // OpenAI and similar legacy keys
	`\b[rs]k_(?:live|test)_[A-Za-z0-9]{10,}`,                          // Stripe
	`\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b`,                         // AWS access key ids
	`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`,   // GitHub
	`\bglpat-[A-Za-z0-9_\-]{20,}`,                                     // GitLab
	`\bxox[abposr]-[A-Za-z0-9\-]{10,}`,                                // Slack
	`\bAIza[0-9A-Za-z_\-]{35}`,                                        // Google API keys
	`\bhf_[A-Za-z0-9]{30,}`,                                           // Hugging Face
	`\bnpm_[A-Za-z0-9]{30,}`,                                          // npm
	`\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]+`, // JWTs
}, "|"))

// String returns s with every secret replaced.
func (r *Redactor) String(s string) string {
	if s == "" {
		return s
	}
	if repl := r.repl.Load(); repl != nil {
		s = repl.Replace(s)
	}
	s = tokenShapes.ReplaceAllString(s, Redacted)
	for _, re := range keyedRules {
		s = replaceKeyed(re, s)
	}
	return s
}

func replaceKeyed(re *regexp.Regexp, s string) string {
	idx := re.FindAllStringSubmatchIndex(s, -1)
	if idx == nil {
		return s
	}
	var b strings.Builder
	prev := 0
	for _, m := range idx {
		// m[6:8] is the value group; when it is empty (the bearer rule) the
		// value is what follows group 2 up to the end of the match, minus a
		// trailing '@' the URL rule consumes.
		vs, ve := m[6], m[7]
		if vs == ve {
			vs, ve = m[5], m[1]
		}
		val := s[vs:ve]
		b.WriteString(s[prev:vs])
		switch {
		case strings.HasPrefix(val, Redacted[:len(Redacted)-1]):
			b.WriteString(val)
		case len(val) >= 2 && (val[0] == '"' || val[0] == '\'') && val[len(val)-1] == val[0]:
			b.WriteByte(val[0])
			b.WriteString(Redacted)
			b.WriteByte(val[0])
		default:
			b.WriteString(Redacted)
		}
		prev = ve
	}
	b.WriteString(s[prev:])
	return b.String()
}

// sensitiveSuffixes are matched against each dotted segment of a key,
// lower-cased with separators removed, so apiKey, api_key, x-api-key and
// headers.Set-Cookie all match.
var sensitiveSuffixes = []string{
	"password", "passwd", "passphrase", "secret", "secrets", "token", "apikey", "accesskey",
	"privatekey", "secretkey", "credential", "credentials", "authorization", "cookie", "cookies",
}

// SensitiveKey reports whether a field named key holds a secret whatever its
// value looks like. Keys match case-insensitively; a dotted key (a
// flattened group) matches when any of its segments does.
func SensitiveKey(key string) bool {
	for seg := range strings.SplitSeq(key, ".") {
		n := normalizeKey(seg)
		if n == "auth" {
			return true
		}
		for _, suf := range sensitiveSuffixes {
			if strings.HasSuffix(n, suf) {
				return true
			}
		}
	}
	return false
}

func normalizeKey(k string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(k) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// Fields returns a redacted copy of a fields map. Keys are redacted too: a
// map keyed by token must not carry the token out in its keys.
func (r *Redactor) Fields(fields map[string]any) map[string]any {
	out := make(map[string]any, len(fields))
	for k, v := range fields {
		out[r.String(k)] = r.field(k, v)
	}
	return out
}

// Value returns a redacted copy of v, a JSON-shaped value (maps, slices,
// strings, numbers, booleans). Other values are first converted to that
// shape through their JSON encoding.
func (r *Redactor) Value(v any) any { return r.field("", v) }

func (r *Redactor) field(key string, v any) any {
	if key != "" && SensitiveKey(key) {
		switch x := v.(type) {
		case nil, bool:
			return v
		case string:
			if x == "" {
				return x
			}
		}
		return Redacted
	}
	switch x := v.(type) {
	case nil, bool, json.Number, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return v
	case string:
		return truncate(r.String(x), maxStringBytes)
	case map[string]any:
		return r.Fields(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = r.field("", e)
		}
		return out
	default:
		return r.field(key, jsonShape(v))
	}
}

// Attr returns a redacted copy of a slog attribute, keeping its groups, for
// handlers that write outside the store (the next handler, stderr).
func (r *Redactor) Attr(a slog.Attr) slog.Attr {
	a.Value = a.Value.Resolve()
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" && SensitiveKey(a.Key) {
			return slog.String(a.Key, Redacted)
		}
		g := a.Value.Group()
		out := make([]slog.Attr, len(g))
		for i, x := range g {
			out[i] = r.Attr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	}
	switch red := r.field(a.Key, valueOf(a.Value)).(type) {
	case string:
		return slog.String(a.Key, red)
	default:
		if a.Value.Kind() == slog.KindAny {
			return slog.Any(a.Key, red)
		}
		return a
	}
}

// jsonShape converts v to maps, slices and scalars through its JSON
// encoding, keeping integers exact; what cannot be encoded becomes text.
func jsonShape(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return truncate(fmt.Sprintf("%+v", v), maxStringBytes)
	}
	if len(b) > maxAnyJSONBytes {
		return truncate(string(b), maxStringBytes)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return truncate(string(b), maxStringBytes)
	}
	return out
}

// truncate cuts s to at most n bytes on a rune boundary and says so.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…[truncated]"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
