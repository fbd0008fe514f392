package provider

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Defaults of RetryPolicy.
const (
	DefaultMaxRetries    = 3
	DefaultBaseDelay     = 500 * time.Millisecond
	DefaultMaxDelay      = 20 * time.Second
	DefaultMaxRetryAfter = 60 * time.Second
)

// RetryPolicy says how often and how patiently an adapter tries a model call
// again after a rate limit or a transient failure. The zero value is the
// default policy.
type RetryPolicy struct {
	// MaxRetries is the number of attempts after the first: 0 means
	// DefaultMaxRetries, a negative value means no retry at all.
	MaxRetries int
	// BaseDelay is the wait before the first retry; each further retry
	// doubles it, up to MaxDelay, with random jitter so that many clients
	// limited at once do not come back in step.
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// MaxRetryAfter is the longest wait a server may ask for (Retry-After).
	// A server asking for more is not waited for: the error is returned at
	// once, because a turn that sleeps for minutes looks hung.
	MaxRetryAfter time.Duration
}

func (p RetryPolicy) attempts() int {
	switch {
	case p.MaxRetries < 0:
		return 1
	case p.MaxRetries == 0:
		return DefaultMaxRetries + 1
	}
	return p.MaxRetries + 1
}

func (p RetryPolicy) backoff(retry int) time.Duration {
	base, ceiling := p.BaseDelay, p.MaxDelay
	if base <= 0 {
		base = DefaultBaseDelay
	}
	if ceiling <= 0 {
		ceiling = DefaultMaxDelay
	}
	d := base
	for i := 0; i < retry && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	// Equal jitter: half fixed, half random, so a wait is never near zero
	// and clients spread out.
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half+1)
}

// RetryableError marks a failure worth another attempt. Err is what the
// caller sees if the attempts run out; RetryAfter is the server's requested
// wait (zero when it asked for none).
type RetryableError struct {
	Err        *Error
	RetryAfter time.Duration
}

func (e *RetryableError) Error() string { return e.Err.Error() }
func (e *RetryableError) Unwrap() error { return e.Err }

// Retryable wraps err so that Retry tries the call again.
func Retryable(err *Error, retryAfter time.Duration) error {
	return &RetryableError{Err: err, RetryAfter: retryAfter}
}

// NotRetryable strips the retry mark from err: an adapter uses it once it
// has streamed events to its caller, since a second attempt would repeat
// them.
func NotRetryable(err error) error {
	var re *RetryableError
	if errors.As(err, &re) {
		return re.Err
	}
	return err
}

// Retry calls attempt until it succeeds, fails with an error that is not a
// *RetryableError, the policy's attempts run out, or ctx is done. On
// cancellation it returns ctx.Err() promptly, also in the middle of a wait.
// When the attempts run out it returns the last *Error, its message saying
// how many attempts were made.
func Retry(ctx context.Context, p RetryPolicy, attempt func(ctx context.Context) error) error {
	maxAttempts := p.attempts()
	maxAfter := p.MaxRetryAfter
	if maxAfter <= 0 {
		maxAfter = DefaultMaxRetryAfter
	}
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := attempt(ctx)
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		var re *RetryableError
		if !errors.As(err, &re) {
			return err
		}
		if n >= maxAttempts {
			return withNote(re.Err, attemptsNote(n))
		}
		wait := p.backoff(n - 1)
		if re.RetryAfter > 0 {
			if re.RetryAfter > maxAfter {
				return withNote(re.Err, fmt.Sprintf("the server asked to wait %s before trying again", re.RetryAfter.Round(time.Second)))
			}
			wait = re.RetryAfter
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func attemptsNote(n int) string {
	if n == 1 {
		return "after 1 attempt"
	}
	return fmt.Sprintf("after %d attempts", n)
}

func withNote(e *Error, note string) *Error {
	c := *e
	c.Message = strings.TrimSpace(c.Message) + " (" + note + ")"
	return &c
}

// RetryAfter reads a server's requested wait from Retry-After-Ms or
// Retry-After (seconds or an HTTP date). ok is false when neither is set or
// readable.
func RetryAfter(h http.Header) (d time.Duration, ok bool) {
	if h == nil {
		return 0, false
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, time.Until(t)), true
	}
	return 0, false
}
