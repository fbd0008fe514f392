package provider

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/desk-runtime/desk/applog"
)

// HTTPFailure is a failed HTTP exchange with a model API, as an adapter saw
// it, for ClassifyHTTP.
type HTTPFailure struct {
	Provider string      // name used in messages: openai, openai-compatible, anthropic
	KeyEnv   string      // the environment variable that holds the key, named in auth errors
	Model    string      // the model of the request
	Status   int         // HTTP status
	Header   http.Header // response headers (Retry-After, x-should-retry)
	Message  string      // the provider's message
	Code     string      // the provider's error code or type, when it gave one
	Secrets  []string    // strings to cut from messages (the key in use)
	// InStream says the failure came as an error event inside a stream
	// that had begun with 200; the status is then inferred from Code.
	InStream bool
}

// ClassifyHTTP turns a failed exchange into a *Error, wrapped in a
// *RetryableError when another attempt may succeed (429 and 5xx, or
// whatever an x-should-retry header says).
//
//	401, 403          → ErrAuth (a 401 message is never repeated: some APIs echo part of the key)
//	404, "no such model" → ErrModel, naming the model
//	429               → ErrRateLimit (retried, except exhausted quotas)
//	408, 409, 5xx     → ErrTransient (retried)
//	other 4xx         → ErrBadRequest with the provider's message
func ClassifyHTTP(f HTTPFailure) error {
	msg := Redact(f.Message, f.Secrets...)
	code := strings.ToLower(f.Code)
	// What the provider said, as much of it as an actor may read: its
	// error type and message, redacted, cut to MaxDetail.
	detail := f.Message
	if f.Code != "" && !strings.Contains(f.Message, f.Code) {
		detail = strings.TrimSuffix(f.Code+": "+f.Message, ": ")
	}
	detail = Detail(detail, f.Secrets...)
	status := f.Status
	where := func(n int) string { return fmt.Sprintf("HTTP %d", n) }
	if f.InStream {
		status = statusOfCode(code)
		where = func(int) string { return "an error event in the stream" }
	}
	withMsg := func(s string) string {
		if detail == "" {
			return s
		}
		return s + ": " + detail
	}
	e := &Error{Provider: f.Provider, Status: f.Status}
	retry := false
	switch {
	case status == http.StatusUnauthorized:
		e.Kind = ErrAuth
		e.Message = fmt.Sprintf("the API key was refused (%s)%s", where(401), keyHint(f.KeyEnv))
	case status == http.StatusForbidden:
		e.Kind = ErrAuth
		e.Message = withMsg(fmt.Sprintf("the API key is not allowed to make this request (%s)", where(403)))
		if f.KeyEnv != "" {
			e.Message += " (check " + f.KeyEnv + ")"
		}
	case status == http.StatusNotFound || (status >= 400 && status < 500 && looksLikeUnknownModel(code, msg)):
		e.Kind = ErrModel
		e.Message = withMsg(fmt.Sprintf("model %q was not found or is not available (%s)", f.Model, where(status)))
	case status == http.StatusTooManyRequests:
		e.Kind = ErrRateLimit
		e.Message = withMsg(fmt.Sprintf("rate limited (%s)", where(429)))
		// An exhausted quota or spending limit does not lift in seconds.
		retry = !strings.Contains(code, "quota") && !strings.Contains(code, "billing") && !strings.Contains(code, "spend_limit")
	case status == http.StatusRequestTimeout || status == http.StatusConflict ||
		(status >= 500 && status != http.StatusNotImplemented):
		e.Kind = ErrTransient
		e.Message = withMsg(fmt.Sprintf("the service failed (%s)", where(status)))
		retry = true
	default:
		e.Kind = ErrBadRequest
		if detail == "" {
			detail = http.StatusText(status)
		}
		e.Message = withMsg(fmt.Sprintf("the request was refused (%s)", where(status)))
	}
	switch f.Header.Get("x-should-retry") {
	case "true":
		retry = e.Kind != ErrAuth
	case "false":
		retry = false
	}
	if !retry {
		return e
	}
	after, _ := RetryAfter(f.Header)
	return Retryable(e, after)
}

// statusOfCode maps an error code or type of a stream error event to the
// HTTP status the same failure has as a response.
func statusOfCode(code string) int {
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(code, w) {
				return true
			}
		}
		return false
	}
	switch {
	case has("rate_limit", "too_many"):
		return http.StatusTooManyRequests
	case has("overloaded", "server_error", "api_error", "internal", "unavailable", "timeout"):
		return http.StatusServiceUnavailable
	case has("authentication", "invalid_api_key"):
		return http.StatusUnauthorized
	case has("permission"):
		return http.StatusForbidden
	case has("not_found"):
		return http.StatusNotFound
	}
	return http.StatusBadRequest
}

func keyHint(env string) string {
	if env == "" {
		return ""
	}
	return "; set " + env + " to a valid key"
}

var unknownModelRE = regexp.MustCompile(`(?i)(\bmodel\b[^.;\n]{0,80}\b(not found|does not exist|doesn't exist|not exist|is unknown|unknown)\b|\b(unknown|invalid|no such|unsupported) model\b|model_not_found|pull(ing)? it first)`)

func looksLikeUnknownModel(code, msg string) bool {
	if code == "model_not_found" || code == "not_found_error" {
		return true
	}
	return unknownModelRE.MatchString(msg)
}

// MissingKey is the error of a call made without a key, before any request.
func MissingKey(providerName, env string) *Error {
	return &Error{
		Kind:     ErrAuth,
		Provider: providerName,
		Message:  "no API key is configured; set " + env,
	}
}

// ClassifyNetwork turns a transport failure (no HTTP response, or a body
// cut short) into a *Error, retryable unless it cannot get better by
// waiting (an unknown host, a refused certificate). endpoint names the
// server in the message; it should carry no credentials.
func ClassifyNetwork(providerName, endpoint string, err error, secrets ...string) error {
	inner := err
	var ue *url.Error
	if errors.As(err, &ue) {
		inner = ue.Err
	}
	msg := Detail(inner.Error(), secrets...)
	e := &Error{Kind: ErrTransient, Provider: providerName, Message: "cannot reach " + endpoint + ": " + msg}

	// Waiting does not help an unknown host or a refused certificate;
	// everything else (refused or reset connections, timeouts, a body cut
	// short) may pass.
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostnameErr x509.HostnameError
	if (errors.As(err, &dnsErr) && dnsErr.IsNotFound) ||
		errors.As(err, &certErr) || errors.As(err, &unknownAuthority) || errors.As(err, &hostnameErr) {
		return e
	}
	return Retryable(e, 0)
}

// EndpointOf is a base URL reduced to scheme and host, for messages: no
// user info, path or query, which could hold a credential.
func EndpointOf(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return "the model server"
	}
	return u.Scheme + "://" + u.Host
}

var (
	keyLikeRE = regexp.MustCompile(`(?i)\b(sk-[a-z0-9_\-*.]{6,}|bearer\s+[a-z0-9_\-.~+/=]{8,})`)
	// Long hex runs (digests, hex keys) and long base64 runs.
	hexRunRE    = regexp.MustCompile(`\b[0-9A-Fa-f]{32,}\b`)
	base64RunRE = regexp.MustCompile(`[A-Za-z0-9+/_\-]{32,}={0,2}`)
)

// Redact cuts the given secrets, anything applog's redactor recognises
// (keyed values such as "Authorization: …", "api_key=…", known key
// shapes, URL passwords), and anything else shaped like an API key, a
// bearer token or a long hex or base64 run, out of s.
func Redact(s string, secrets ...string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	s = applog.NewRedactor().String(s)
	s = keyLikeRE.ReplaceAllString(s, "[redacted]")
	s = hexRunRE.ReplaceAllString(s, "[redacted]")
	return base64RunRE.ReplaceAllStringFunc(s, func(run string) string {
		if looksLikeKey(run) {
			return "[redacted]"
		}
		return run
	})
}

// looksLikeKey tells a base64-shaped run that is a credential from a long
// name (meta-llama/Llama-3-70B-Instruct-Turbo): keys mix upper case,
// lower case and digits within one long unbroken stretch.
func looksLikeKey(run string) bool {
	longest, cur := 0, 0
	var upper, lower, digit bool
	for _, r := range run {
		switch {
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= '0' && r <= '9':
			digit = true
		default:
			cur = 0
			continue
		}
		cur++
		longest = max(longest, cur)
	}
	return longest >= 20 && upper && lower && digit
}

// MaxDetail bounds what a provider's own words (its error type and
// message) add to an error desk shows: a reason an actor reads never
// carries more of a model server's answer than that.
const MaxDetail = 300

// Detail is a provider's text made fit to show: redacted first (so a cut
// cannot leave part of a secret behind a pattern), then cut to MaxDetail
// characters.
func Detail(s string, secrets ...string) string {
	s = strings.Join(strings.Fields(Redact(s, secrets...)), " ")
	if utf8.RuneCountInString(s) <= MaxDetail {
		return s
	}
	r := []rune(s)
	return string(r[:MaxDetail-1]) + "…"
}

// ErrorBody reads the message and code out of an error response body in
// the JSON shapes model servers use: {"error":{"message","type","code"}}
// (OpenAI, Anthropic), {"error":"…"} (Ollama), {"message","type","code"}
// (vLLM), {"detail":"…"} (FastAPI servers). Nothing else of a body is
// kept: a body that is not JSON (an HTML page of a proxy, a debug dump)
// or has none of those fields gives "", so only the status speaks for it.
func ErrorBody(body []byte) (message, code string) {
	var top map[string]any
	if err := json.Unmarshal(body, &top); err != nil {
		return "", ""
	}
	pick := func(m map[string]any, keys ...string) string {
		for _, k := range keys {
			switch v := m[k].(type) {
			case string:
				if v != "" {
					return v
				}
			case float64:
				return fmt.Sprint(v)
			}
		}
		return ""
	}
	switch v := top["error"].(type) {
	case map[string]any:
		return pick(v, "message", "msg"), pick(v, "code", "type")
	case string:
		return v, pick(top, "code", "type")
	}
	return pick(top, "message", "detail", "msg"), pick(top, "code", "type")
}
