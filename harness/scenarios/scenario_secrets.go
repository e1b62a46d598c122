package scenarios

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/rendermac/rendermac/server/api"
)

// Secrets are never logged (SPEC section 1: the commit token "never
// logged"; section 6 and the standards: API keys, device tokens, pairing
// codes, operator credentials, the metrics token). After every scenario,
// every record that the run's control-plane processes and in-process
// agents logged, at any level, is searched for every secret the scenario
// saw: a hit fails the scenario, naming the secret's kind and the line's
// message, never the secret.

// scSecret is one secret of the run, named for a failure message.
type scSecret struct{ what, value string }

// minSecretLen keeps short strings that are not secrets (a test's
// literal) from matching by chance.
const minSecretLen = 12

// secretsSeen lists the secrets the run saw: the API keys, device tokens,
// commit tokens offered (to the script's agents and, through their relays,
// to the shipped agents), pairing codes (as printed, normalized, and their
// secret part), operator credentials and session cookies, metrics tokens
// and the signing key. With hashes, each one's SHA-256 hex (the stored
// form) too, for pages that must show neither.
func (r *scRun) secretsSeen(hashes bool) []scSecret {
	var out []scSecret
	add := func(what, v string) {
		if len(v) < minSecretLen {
			return
		}
		out = append(out, scSecret{what, v})
		if hashes {
			out = append(out, scSecret{"the hash of " + what, api.HashSecret(v)})
		}
	}
	r.mu.Lock()
	add("the buyer's API key", r.apiKey)
	for who, k := range r.intruderKeys {
		add("the API key of "+who, k)
	}
	for name, o := range r.offers {
		add("the commit token of "+name, o.CommitToken)
	}
	r.mu.Unlock()
	for name, a := range r.agents {
		add("the device token of "+name, a.token)
	}
	for name, a := range r.real {
		add("the device token of "+name, a.token)
	}
	if r.surface != nil {
		for name, c := range r.surface.codes {
			norm := api.NormalizePairingCode(c)
			add("pairing code "+name, c)
			add("pairing code "+name+" (normalized)", norm)
			if len(norm) > 8 {
				add("the secret of pairing code "+name, norm[8:])
			}
		}
	}
	if o := r.ops; o != nil {
		for name, k := range o.keys {
			add("API key "+name, k)
		}
		for name, op := range o.operators {
			add("the credential of operator "+name, op.credential)
		}
		for name, c := range o.cookies {
			add("session cookie "+name, c.Value)
		}
		for name, t := range o.tokens {
			add("metrics token "+name, t)
		}
	}
	out = append(out, scSecret{"the signing key", string(scSigningKey)},
		scSecret{"the signing key (hex)", hex.EncodeToString(scSigningKey)},
		scSecret{"the signing key (base64)", base64.StdEncoding.EncodeToString(scSigningKey)})
	return out
}

// logRecord renders a record whole, message and every attribute, as the
// secrets check searches it.
func logRecord(rec slog.Record, attrs []slog.Attr) string {
	var b strings.Builder
	b.WriteString(rec.Message)
	for _, a := range attrs {
		fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.Resolve().String())
	}
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.Resolve().String())
		return true
	})
	return b.String()
}

// logLine keeps one rendered record of process who for the secrets check.
func (r *scRun) logLine(who, line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logText = append(r.logText, who+": "+line)
}

// checkSecretsNotLogged fails when any kept log line holds a secret the
// run saw.
func (r *scRun) checkSecretsNotLogged() error {
	secrets := r.secretsSeen(false)
	r.mu.Lock()
	lines := append([]string(nil), r.logText...)
	r.mu.Unlock()
	var bad []string
	for _, l := range lines {
		for _, s := range secrets {
			if strings.Contains(l, s.value) {
				bad = append(bad, fmt.Sprintf("%s in %q", s.what, redact(l, secrets)))
			}
		}
	}
	if len(bad) == 0 {
		r.tl.add(laneDatabase, fmt.Sprintf("no secret in the %d log records (%d secrets searched)", len(lines), len(secrets)))
		return nil
	}
	sort.Strings(bad)
	r.tl.add(laneDatabase, "SECRETS LOGGED: "+strings.Join(bad, "; "))
	return fmt.Errorf("secrets logged: %s", strings.Join(bad, "; "))
}

// redact replaces every secret in l by its name, and shortens it.
func redact(l string, secrets []scSecret) string {
	for _, s := range secrets {
		l = strings.ReplaceAll(l, s.value, "<"+s.what+">")
	}
	if len(l) > 200 {
		l = l[:200] + "..."
	}
	return l
}

// scRecorder is a slog handler keeping every record of process who for
// the secrets check, and passing it on to next (nil: nowhere).
type scRecorder struct {
	r     *scRun
	who   string
	attrs []slog.Attr
	next  slog.Handler
}

func (h scRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h scRecorder) Handle(ctx context.Context, rec slog.Record) error {
	h.r.logLine(h.who, logRecord(rec, h.attrs))
	if h.next != nil && h.next.Enabled(ctx, rec.Level) {
		return h.next.Handle(ctx, rec)
	}
	return nil
}

func (h scRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	h.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	if h.next != nil {
		h.next = h.next.WithAttrs(attrs)
	}
	return h
}

func (h scRecorder) WithGroup(string) slog.Handler { return h }
