package scenarios

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// scLogLine is one log record of a stack: the gateway lane of the timeline
// and what `reached log` searches, so a scenario can show the gateway took
// the branch it exists for (retried a commit, sent a cancel, gave up).
type scLogLine struct {
	gateway string
	level   slog.Level
	msg     string
	attrs   map[string]string
}

// scLogHandler records a stack's Info and louder records on the run and,
// when EnvOptions.Log is set, writes them as text there too.
type scLogHandler struct {
	r       *scRun
	gateway string
	attrs   []slog.Attr
}

func (h *scLogHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *scLogHandler) Handle(_ context.Context, rec slog.Record) error {
	line := scLogLine{gateway: h.gateway, level: rec.Level, msg: rec.Message, attrs: map[string]string{}}
	add := func(a slog.Attr) bool {
		line.attrs[a.Key] = a.Value.Resolve().String()
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	rec.Attrs(add)
	h.r.logLine(h.gateway, logRecord(rec, h.attrs))
	if w := h.r.env.opts.Log; w != nil {
		fmt.Fprintf(w, "%s %s %s %s %v\n", rec.Time.Format(time.TimeOnly), h.gateway, rec.Level, rec.Message, line.attrs)
	}
	if rec.Level < slog.LevelInfo {
		return nil
	}
	h.r.mu.Lock()
	h.r.logs = append(h.r.logs, line)
	h.r.mu.Unlock()
	// The buyer's and agents' own lanes show their requests; the API's
	// access log only earns a place when a request failed.
	if line.msg == "http request" && !strings.HasPrefix(line.attrs["status"], "5") {
		return nil
	}
	h.r.tl.addLazy(laneGateway, func() string { return h.r.renderLog(line) })
	return nil
}

func (h *scLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &scLogHandler{r: h.r, gateway: h.gateway, attrs: append(slices.Clone(h.attrs), attrs...)}
}

// WithGroup keeps the attributes flat: the timeline does not need groups.
func (h *scLogHandler) WithGroup(string) slog.Handler { return h }

// scLogKeys are the attributes a timeline label shows, in this order; ids
// are rendered by their script names.
var scLogKeys = []string{"device_id", "job_id", "attempt_id", "code", "failure_code", "reason", "requeued", "route",
	"status", "err", "close_status"}

func (r *scRun) renderLog(l scLogLine) string {
	var b strings.Builder
	b.WriteString(l.gateway)
	if l.level >= slog.LevelWarn {
		b.WriteString(" " + strings.ToLower(l.level.String()))
	}
	b.WriteString(": " + l.msg)
	for _, k := range scLogKeys {
		v, ok := l.attrs[k]
		if !ok {
			continue
		}
		switch k {
		case "device_id", "job_id", "attempt_id":
			v = r.name(v)
		case "err":
			if len(v) > 120 {
				v = v[:120] + "..."
			}
		}
		fmt.Fprintf(&b, " %s=%s", strings.TrimSuffix(k, "_id"), v)
	}
	return b.String()
}

// logged reports whether a stack (any, when gateway is "") logged a record
// at level or louder whose message contains substr.
func (r *scRun) logged(gateway, substr string, level slog.Level) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.logs {
		if (gateway == "" || l.gateway == gateway) && l.level >= level && strings.Contains(l.msg, substr) {
			return true
		}
	}
	return false
}
