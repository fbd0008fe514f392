// Package client is desk's Go client for the HTTP API. The CLI and the tests
// use it, so what they exercise is what users get. API errors come back as
// *desk.Error carrying the server's code, so callers (and the CLI's exit
// codes) see the same errors the server produced.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/desk-runtime/desk"
)

// Client talks to one desk server with one bearer token. Its zero HTTP field
// means a default streaming client (see New); BaseURL has no trailing slash.
type Client struct {
	BaseURL string
	Token   string
	HTTP    *http.Client
	// UserAgent is sent with every request when not empty.
	UserAgent string
}

// Timeouts of the default transport. There is deliberately no total request
// timeout: a multi-gigabyte upload or download may take as long as it takes,
// and callers bound it with their context instead.
const (
	dialTimeout           = 10 * time.Second
	tlsHandshakeTimeout   = 10 * time.Second
	responseHeaderTimeout = 5 * time.Minute // after the request is sent; covers fsync of a large upload
	expectContinueTimeout = 2 * time.Second
	idleConnTimeout       = 90 * time.Second
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// NewHTTPClient returns the HTTP client New uses: it streams bodies, honours
// the proxy environment, and times out dialling, TLS handshakes and waiting
// for response headers, but never a transfer in progress.
func NewHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   dialTimeout,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   tlsHandshakeTimeout,
		ResponseHeaderTimeout: responseHeaderTimeout,
		ExpectContinueTimeout: expectContinueTimeout,
		IdleConnTimeout:       idleConnTimeout,
		MaxIdleConnsPerHost:   4,
	}}
}

// New accepts "host:port", "http://host:port" or "https://…"; no trailing
// path is needed, though a path prefix (a proxy's mount point) is kept.
func New(server, token string) (*Client, error) {
	base, err := baseURL(server)
	if err != nil {
		return nil, err
	}
	return &Client{BaseURL: base, Token: token, HTTP: NewHTTPClient()}, nil
}

func baseURL(server string) (string, error) {
	s := strings.TrimSpace(server)
	if s == "" {
		return "", desk.Errorf(desk.EINVALID, "server address is empty")
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", desk.Errorf(desk.EINVALID, "server address %q: %v", server, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", desk.Errorf(desk.EINVALID, "server address %q: scheme must be http or https", server)
	}
	if u.Host == "" {
		return "", desk.Errorf(desk.EINVALID, "server address %q has no host", server)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", desk.Errorf(desk.EINVALID, "server address %q must be a plain host:port or URL", server)
	}
	if strings.HasPrefix(u.Host, ":") {
		// ":7777" means this machine, as it does for a listen address.
		u.Host = "127.0.0.1" + u.Host
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u.String(), nil
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP()
}

var defaultHTTP = sync.OnceValue(NewHTTPClient)

// request is one call: its body (nil for none) and the body's length, or -1
// when unknown.
type request struct {
	method, path string
	body         io.Reader
	size         int64
	contentType  string
	header       http.Header
}

// Do sends one request; body may be nil; out (if non-nil) receives the
// decoded JSON of a 2xx answer. A non-2xx answer is decoded from
// {"error":{"code","message"}} into *desk.Error (an unknown body becomes code
// "internal" with the status text). A connection failure is an
// EUNAVAILABLE error naming the server.
func (c *Client) Do(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	resp, err := c.send(ctx, request{method: method, path: path, body: body, size: -1, contentType: contentType})
	if err != nil {
		return err
	}
	return decodeBody(resp, out)
}

// doJSON sends v (if not nil) as a JSON body and decodes the answer into out.
func (c *Client) doJSON(ctx context.Context, method, path string, v, out any) error {
	r := request{method: method, path: path, size: -1}
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		r.body, r.size, r.contentType = bytes.NewReader(b), int64(len(b)), "application/json"
	}
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	return decodeBody(resp, out)
}

// send performs the request and returns a 2xx response with its body open;
// any other outcome is an error and the body is closed.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	if r.body == http.NoBody {
		r.size = 0
	}
	body := r.body
	var rec *recordingReader
	switch r.body.(type) {
	case nil, *bytes.Reader, *bytes.Buffer, *strings.Reader:
		// In memory: net/http knows the length and can replay it.
	default:
		if r.body == http.NoBody {
			break
		}
		// A stream (a file, stdin, a pipe). Record its own read errors, so
		// a failing local file is reported as itself rather than as an
		// unreachable server. The wrapper is not a Closer, so the caller
		// keeps ownership of the reader.
		rec = &recordingReader{r: r.body, size: r.size}
		body = rec
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.BaseURL+r.path, body)
	if err != nil {
		return nil, desk.Errorf(desk.EINVALID, "build request %s %s: %v", r.method, r.path, err)
	}
	if rec != nil {
		switch {
		case r.size == 0:
			req.Body, req.ContentLength = http.NoBody, 0
		case r.size > 0:
			// Sent as Content-Length, so the server streams the body to
			// disk knowing how much is coming.
			req.ContentLength = r.size
		}
		// Let the server refuse (unknown session, bad token, quota) before
		// a large body is sent at all.
		if r.size < 0 || r.size > 1<<20 {
			req.Header.Set("Expect", "100-continue")
		}
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	req.Header.Set("Accept", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		if rerr := rec.readErr(); rerr != nil {
			return nil, fmt.Errorf("read request body: %w", rerr)
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, desk.Errorf(desk.EUNAVAILABLE, "cannot reach desk at %s: %v", c.BaseURL, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, errorFrom(resp)
	}
	return resp, nil
}

// errorFrom turns a non-2xx response into *desk.Error.
func errorFrom(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var eb desk.ErrorBody
	if json.Unmarshal(b, &eb) == nil && eb.Error.Code != "" {
		return &desk.Error{Code: eb.Error.Code, Message: eb.Error.Message}
	}
	msg := "server answered " + resp.Status
	if t := strings.TrimSpace(string(b)); t != "" && len(t) <= 200 && !bytes.ContainsAny(b, "\x00") {
		msg += ": " + t
	}
	return desk.Errorf(desk.EINTERNAL, "%s", msg)
}

// decodeBody decodes a 2xx JSON body into out (if not nil) and closes it,
// draining a little so the connection can be reused.
func decodeBody(resp *http.Response, out any) error {
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
	}()
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return desk.Errorf(desk.EINTERNAL, "decode %s answer to %s %s: %v", resp.Status, resp.Request.Method, resp.Request.URL.Path, err)
	}
	return nil
}

// recordingReader remembers the first error its reader returned. net/http
// reads request bodies on its own goroutine, hence the lock.
type recordingReader struct {
	r    io.Reader
	size int64 // expected length, or -1
	n    int64 // bytes read so far
	mu   sync.Mutex
	err  error
}

func (r *recordingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n += int64(n)
	if err == io.EOF && r.size >= 0 && r.n < r.size {
		err = fmt.Errorf("body ended after %d of %d bytes: %w", r.n, r.size, io.ErrUnexpectedEOF)
	}
	if err != nil {
		r.mu.Lock()
		if r.err == nil {
			r.err = err
		}
		r.mu.Unlock()
	}
	return n, err
}

// readErr returns the reader's first error other than io.EOF.
func (r *recordingReader) readErr() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if errors.Is(r.err, io.EOF) {
		return nil
	}
	return r.err
}

// esc escapes one path segment.
func esc(s string) string { return url.PathEscape(s) }

// withQuery appends the encoded query to path when it is not empty.
func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
