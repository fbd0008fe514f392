package applog

import (
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
)

// Attribute keys the handler lifts out of the fields: KeyComponent names
// the entry's source (overriding the handler's), and the ids fill the
// entry's columns so filters can use them. Only top-level attributes are
// lifted; inside a group they are ordinary fields. They are the root
// package's shared log keys (desk.Log…), which every component logs with.
const (
	KeyComponent   = desk.LogComponent
	KeyWorkspaceID = desk.LogWorkspaceID
	KeySessionID   = desk.LogSessionID
)

// DefaultSource is the source of entries whose handler named none.
const DefaultSource = "desk"

// Handler returns a slog.Handler that sends every record at or above
// Options.Level to the app log under source (overridden by a top-level
// "component" attribute), and forwards a redacted copy to Options.Next.
// Handle never waits for the database: it only appends to a bounded queue.
func (s *Service) Handler(source string) slog.Handler {
	if source == "" {
		source = DefaultSource
	}
	return &handler{s: s, source: source, next: s.opts.Next}
}

// Logger is slog.New(s.Handler(source)).
func (s *Service) Logger(source string) *slog.Logger { return slog.New(s.Handler(source)) }

type field struct {
	key string
	val any
}

type handler struct {
	s      *Service
	source string
	// prefix is the open groups as "a.b.", empty at the top level.
	prefix string
	attrs  []field
	ws     string
	ses    string
	next   slog.Handler
}

var _ slog.Handler = (*handler)(nil)

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.s.opts.Level.Level() || (h.next != nil && h.next.Enabled(ctx, l))
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	c := *h
	c.attrs = append([]field(nil), h.attrs...)
	for _, a := range as {
		c.flatten(h.prefix, a, h.prefix == "", &c.attrs)
	}
	if h.next != nil {
		red := make([]slog.Attr, len(as))
		for i, a := range as {
			red[i] = h.s.red.Attr(a)
		}
		c.next = h.next.WithAttrs(red)
	}
	return &c
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "."
	if h.next != nil {
		c.next = h.next.WithGroup(name)
	}
	return &c
}

// flatten appends a's leaves to out under prefix, lifting the well-known
// keys when top is true (the attribute is not inside any group).
func (h *handler) flatten(prefix string, a slog.Attr, top bool, out *[]field) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p = prefix + a.Key + "."
		}
		for _, g := range a.Value.Group() {
			h.flatten(p, g, top && a.Key == "", out)
		}
		return
	}
	if top {
		switch a.Key {
		case KeyComponent:
			if v := a.Value.String(); v != "" {
				h.source = v
			}
			return
		case KeyWorkspaceID:
			h.ws = a.Value.String()
			return
		case KeySessionID:
			h.ses = a.Value.String()
			return
		}
	}
	*out = append(*out, field{prefix + a.Key, valueOf(a.Value)})
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= h.s.opts.Level.Level() {
		// flatten may lift ids and the component into e, so work on a copy.
		e := *h
		fields := append([]field(nil), h.attrs...)
		r.Attrs(func(a slog.Attr) bool {
			e.flatten(h.prefix, a, h.prefix == "", &fields)
			return true
		})
		m := make(map[string]any, len(fields))
		for _, f := range fields {
			m[f.key] = f.val
		}
		at := r.Time
		if at.IsZero() {
			at = h.s.now()
		}
		h.s.enqueue(&desk.LogEntry{
			At:          at.UTC().Truncate(time.Microsecond),
			Level:       levelName(r.Level),
			Source:      e.source,
			Message:     r.Message,
			Fields:      m,
			WorkspaceID: e.ws,
			SessionID:   e.ses,
		})
	}
	if h.next != nil && h.next.Enabled(ctx, r.Level) {
		nr := slog.NewRecord(r.Time, r.Level, h.s.red.String(r.Message), r.PC)
		r.Attrs(func(a slog.Attr) bool {
			nr.AddAttrs(h.s.red.Attr(a))
			return true
		})
		return h.next.Handle(ctx, nr)
	}
	return nil
}

// levelName maps slog's open-ended levels onto the four app log levels.
func levelName(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return desk.LogDebug
	case l < slog.LevelWarn:
		return desk.LogInfo
	case l < slog.LevelError:
		return desk.LogWarn
	default:
		return desk.LogError
	}
}

// valueOf turns a resolved slog value into a JSON-shaped one, now, in the
// caller's goroutine: the record's values may change once Handle returns.
func valueOf(v slog.Value) any {
	switch v.Kind() {
	case slog.KindString:
		return v.String()
	case slog.KindInt64:
		return v.Int64()
	case slog.KindUint64:
		return v.Uint64()
	case slog.KindFloat64:
		f := v.Float64()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
		return f
	case slog.KindBool:
		return v.Bool()
	case slog.KindDuration:
		return v.Duration().String()
	case slog.KindTime:
		return v.Time().Format(time.RFC3339Nano)
	case slog.KindAny:
		return anyValue(v.Any())
	default:
		return v.String()
	}
}

func anyValue(x any) (out any) {
	defer func() {
		// A String or Error method that panics (often on a nil pointer)
		// must not take the logging caller down.
		if p := recover(); p != nil {
			out = fmt.Sprintf("!PANIC: %v", p)
		}
	}()
	switch x := x.(type) {
	case nil:
		return nil
	case string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32:
		return x
	case float64:
		return valueOf(slog.Float64Value(x))
	case error:
		return x.Error()
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
		return jsonShape(x)
	case json.Marshaler, encoding.TextMarshaler:
		return jsonShape(x)
	case fmt.Stringer:
		return x.String()
	default:
		return jsonShape(x)
	}
}
