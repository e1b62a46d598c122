package scenarios

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/console"
)

// The operators' web console as an operator, a browser and an intruder
// meet it (SPEC section 6, "Console"): credentials minted as `rendermac
// admin create-operator` mints them, the login form and its session
// cookie (flags, expiry at the decision clock, tampering, revocation), the
// events stream, card uploads, and every page searched for the secrets the
// run saw. Requests go through the `request` command (as=operator:NAME,
// as=cookie:NAME) or the commands here.

func init() {
	for name, h := range map[string]scCommand{
		"operator": cmdOperator, "console": cmdConsole,
	} {
		scCommands[name] = h
	}
}

// scOperator is one operator credential of the run.
type scOperator struct{ id, credential string }

// operatorCredential is the credential's form (SPEC section 6: "rmo_" and
// 32 random bytes, base64url without padding).
var operatorCredential = regexp.MustCompile(`^rmo_[A-Za-z0-9_-]{43}$`)

// cmdOperator mints an operator credential (and checks its form and that
// only its SHA-256 is stored) or revokes one.
// Example: operator new o1
// Example: operator revoke o1
func cmdOperator(r *scRun, st scStep) error {
	o, name := r.opsState(), arg(st, 1)
	switch arg(st, 0) {
	case "new":
		if name == "" || o.operators[name] != nil {
			return errors.New("want: operator new NEW-NAME")
		}
		id, cred, err := console.CreateOperator(r.ctx, r.observer, "scenario "+name)
		if err != nil {
			return err
		}
		o.operators[name] = &scOperator{id: id, credential: cred}
		var hash, row string
		if err := r.observer.QueryRow(r.ctx, `SELECT token_hash, t::text FROM operators t WHERE id = $1`, id).Scan(&hash, &row); err != nil {
			return fmt.Errorf("operator new %s: read its row: %w", name, err)
		}
		switch {
		case !operatorCredential.MatchString(cred):
			return fmt.Errorf("operator new %s: credential %q is not rmo_ and 32 bytes of base64url", name, cred)
		case hash != api.HashSecret(cred):
			return fmt.Errorf("operator new %s: token_hash %q is not the lowercase hex SHA-256 of the credential", name, hash)
		case strings.Contains(row, cred) || strings.Contains(row, strings.TrimPrefix(cred, "rmo_")):
			return fmt.Errorf("operator new %s: the operators row holds the credential itself: %s", name, row)
		}
		r.tl.add(laneDatabase, "operator credential "+name+" minted (rmo_..., only its SHA-256 stored)")
		r.count("operator.minted", 1)
		return nil
	case "revoke":
		op := o.operators[name]
		if op == nil {
			return fmt.Errorf("operator revoke: no operator %q", name)
		}
		if err := console.RevokeOperator(r.ctx, r.observer, op.id); err != nil {
			return err
		}
		r.tl.add(laneDatabase, "operator "+name+" revoked")
		return nil
	}
	return errors.New("want: operator new|revoke NAME")
}

// cmdConsole drives the console:
//
//	console login NAME [credential=WHO] [from=ADDR] [via=G] -> 303 cookie | STATUS CODE
//	    POST /console/login with WHO's secret (secretFor; default
//	    operator:NAME); a 303 must set the session cookie as the SPEC
//	    says (HttpOnly, SameSite=Strict, Path /console, 12 h, not Secure
//	    over plain HTTP), which is kept as cookie:NAME
//	console tamper NAME as=COPY how=expiry|id|tag
//	    a copy of cookie:NAME with its expiry pushed a year on, its
//	    operator id changed, or its tag flipped (the tag kept otherwise)
//	console watch W [as=WHO] [via=G]
//	    opens GET /console/events and reads it in the background
//	console watched W change JOB
//	    waits for an `event: change` whose data names JOB
//	console upload FILE card|other [as=WHO] [origin=URL] -> STATUS [CODE]
//	    POST /console/cards with a card (or a JSON file that is not one)
//	    named FILE; a 303 must have stored exactly the bytes sent, a
//	    refusal must leave the cards directory as it was
//	console pages [as=WHO] [via=G]
//	    every page (fleet, queue, jobs, each job, each device, cards) answers 200 and
//	    holds none of the run's secrets, nor their hashes
//	console act cancel|drain|revoke TARGET [as=WHO] [csrf=page|none|cookie:NAME] [confirm=no] [from=ADDR] [via=G] -> STATUS [CODE]
//	    an action on a job (cancel J) or an agent's device (drain A,
//	    revoke A): GET its confirmation page as WHO, take the form's CSRF
//	    token (csrf=page, the default; none sends no token; cookie:NAME
//	    takes the token of another session's page), POST the form as WHO
//	    (Accept: application/json); a 200 must have journalled the action
//	    with the actor operator naming WHO's operator (job_events for a
//	    cancel, device_events for a device), a refusal must leave every
//	    row as it was
//
// Example: console login o1 -> 303 cookie
// Example: console login x credential=key:k2 -> 403 forbidden
// Example: console tamper o1 as=t1 how=expiry
// Example: console watched w1 change j1
// Example: console upload 2030-01-02-a.json card -> 303
// Example: console act cancel j1 as=cookie:o1 -> 200 cancelling
// Example: console act drain a1 as=buyer -> 403 forbidden
// Example: console act cancel j1 as=cookie:o1 csrf=none -> 403 csrf_refused
func cmdConsole(r *scRun, st scStep) error {
	switch arg(st, 0) {
	case "login":
		return r.consoleLogin(st)
	case "tamper":
		return r.consoleTamper(st)
	case "watch":
		return r.consoleWatch(st)
	case "watched":
		return r.consoleWatched(st)
	case "upload":
		return r.consoleUpload(st)
	case "pages":
		return r.consolePages(st)
	case "act":
		return r.consoleAct(st)
	}
	return errors.New("want: console login|tamper|watch|watched|upload|pages|act ...")
}

func (r *scRun) consoleLogin(st scStep) error {
	name := arg(st, 1)
	if name == "" || len(st.arrow) < 1 {
		return errors.New("want: console login NAME [credential=WHO] [from=ADDR] -> 303 cookie | STATUS CODE")
	}
	base, err := r.baseURL(st)
	if err != nil {
		return err
	}
	secret, _, err := r.secretFor(st.opt("credential", "operator:"+name))
	if err != nil {
		return err
	}
	form := url.Values{"credential": {secret}}.Encode()
	req, err := http.NewRequestWithContext(r.ctx, http.MethodPost, base+console.Prefix+"/login", strings.NewReader(form))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if st.opt("accept", "") == "json" {
		req.Header.Set("Accept", "application/json")
	}
	var rep scReply
	send := func() error {
		rep, err = r.do(req, st.opt("from", ""))
		return err
	}
	what := fmt.Sprintf("console login %s with %s from %s", name, st.opt("credential", "operator:"+name), orDash(st.opt("from", "")))
	if st.arrow[0] != "303" {
		err = r.unchanged(what, send)
	} else {
		err = send()
	}
	if err != nil {
		return err
	}
	r.tl.add(laneAgent, fmt.Sprintf("%s: %d %s", what, rep.status, rep.code))
	r.reply(fmt.Sprintf("console login %s -> %d %s", name, rep.status, rep.code))
	if st.arrow[0] != "303" {
		if err := r.judge(rep, st.arrow); err != nil {
			return fmt.Errorf("%s: want %s: %w", what, strings.Join(st.arrow, " "), err)
		}
		return nil
	}
	c, err := sessionCookie(rep)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	r.opsState().cookies[name] = c
	r.count("console.login", 1)
	return nil
}

// sessionCookie checks a login's 303 and its Set-Cookie against SPEC
// section 6 and returns the cookie as a browser would send it back.
func sessionCookie(rep scReply) (*http.Cookie, error) {
	resp := http.Response{Header: rep.header}
	var got *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == console.CookieName {
			got = c
		}
	}
	switch {
	case rep.status != http.StatusSeeOther || rep.header.Get("Location") != console.Prefix+"/":
		return nil, fmt.Errorf("want 303 to %s/, got %d to %q: %s", console.Prefix, rep.status, rep.header.Get("Location"), trimBody(rep.body))
	case got == nil:
		return nil, fmt.Errorf("no %s cookie in %q", console.CookieName, rep.header.Values("Set-Cookie"))
	case !got.HttpOnly || got.SameSite != http.SameSiteStrictMode || got.Path != console.Prefix || got.Secure:
		return nil, fmt.Errorf("session cookie %q: want HttpOnly, SameSite=Strict, Path=%s, not Secure over plain HTTP", got.Raw, console.Prefix)
	case got.MaxAge != int(12*time.Hour/time.Second):
		return nil, fmt.Errorf("session cookie %q: want Max-Age %d (12 h)", got.Raw, int(12*time.Hour/time.Second))
	}
	return &http.Cookie{Name: got.Name, Value: got.Value}, nil
}

// The session cookie's layout (SPEC section 6: operator id and expiry,
// HMAC-tagged): 8 bytes of big-endian Unix expiry, the 36-byte id, the tag.
const cookieExpiryBytes, cookieIDBytes = 8, 36

func (r *scRun) consoleTamper(st scStep) error {
	o := r.opsState()
	c, as := o.cookies[arg(st, 1)], st.opt("as", "")
	if c == nil || as == "" {
		return errors.New("want: console tamper NAME as=COPY how=expiry|id|tag (after console login NAME)")
	}
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || len(raw) <= cookieExpiryBytes+cookieIDBytes {
		return fmt.Errorf("console tamper: cookie %s is not expiry, id and tag: %v", arg(st, 1), err)
	}
	switch st.opt("how", "") {
	case "expiry":
		raw[cookieExpiryBytes-3]++ // about 194 days later
	case "id":
		raw[cookieExpiryBytes] ^= 0x01
	case "tag":
		raw[len(raw)-1] ^= 0x01
	default:
		return errors.New("console tamper: how=expiry, id or tag")
	}
	o.cookies[as] = &http.Cookie{Name: c.Name, Value: base64.RawURLEncoding.EncodeToString(raw)}
	r.tl.add(laneAgent, fmt.Sprintf("cookie %s: a copy %s with its %s tampered", arg(st, 1), as, st.opt("how", "")))
	return nil
}

// scWatch is one open GET /console/events.
type scWatch struct {
	resp   *http.Response
	events chan [2]string // event name, data
	done   chan struct{}
}

func (w *scWatch) stop() {
	_ = w.resp.Body.Close()
	<-w.done
}

func (r *scRun) consoleWatch(st scStep) error {
	o, name := r.opsState(), arg(st, 1)
	if name == "" || o.watches[name] != nil {
		return errors.New("want: console watch NEW-NAME [as=WHO]")
	}
	base, err := r.baseURL(st)
	if err != nil {
		return err
	}
	bearer, cookie, err := r.secretFor(st.opt("as", ""))
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, base+console.Prefix+"/events", nil)
	if err != nil {
		return err
	}
	present(req, bearer, cookie)
	resp, err := (&http.Client{}).Do(req) // no timeout: the stream stays open
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		return fmt.Errorf("console watch: GET %s/events: %d %q, want 200 text/event-stream", console.Prefix, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	w := &scWatch{resp: resp, events: make(chan [2]string, 64), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(resp.Body)
		var event, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if event != "" || data != "" {
					select {
					case w.events <- [2]string{event, data}:
					default:
					}
				}
				event, data = "", ""
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	o.watches[name] = w
	r.tl.add(laneAgent, "console events stream "+name+" open")
	return nil
}

func (r *scRun) consoleWatched(st scStep) error {
	w := r.opsState().watches[arg(st, 1)]
	if w == nil || arg(st, 2) != "change" {
		return errors.New("want: console watched W change JOB (after console watch W)")
	}
	id, err := r.jobID(arg(st, 3))
	if err != nil {
		return err
	}
	deadline := time.After(r.timeout)
	var seen []string
	for {
		select {
		case ev := <-w.events:
			seen = append(seen, ev[0]+" "+ev[1])
			var d struct {
				Jobs []string `json:"jobs"`
			}
			if ev[0] != "change" {
				continue
			}
			if err := json.Unmarshal([]byte(ev[1]), &d); err != nil {
				return fmt.Errorf("console watched: event data %q is not {\"jobs\":[...]}", ev[1])
			}
			if slices.Contains(d.Jobs, id) {
				r.tl.add(laneAgent, fmt.Sprintf("console events %s: change naming %s", arg(st, 1), arg(st, 3)))
				r.count("console.event", 1)
				return nil
			}
		case <-w.done:
			return fmt.Errorf("console watched: the stream ended before a change naming %s (saw %q)", arg(st, 3), seen)
		case <-deadline:
			return fmt.Errorf("console watched: no `event: change` naming %s within %v (saw %q)", arg(st, 3), r.timeout, seen)
		}
	}
}

// cardsDir is the run's qualification cards directory, which every
// stack's console lists and stores uploads in.
func (r *scRun) cardsDir() (string, error) {
	dir := filepath.Join(r.dir, "cards")
	return dir, os.MkdirAll(dir, 0o700)
}

func (r *scRun) consoleUpload(st scStep) error {
	name, kind := arg(st, 1), arg(st, 2)
	if name == "" || (kind != "card" && kind != "other") || len(st.arrow) < 1 {
		return errors.New("want: console upload FILE card|other [as=WHO] [origin=URL] -> STATUS [CODE]")
	}
	base, err := r.baseURL(st)
	if err != nil {
		return err
	}
	var content bytes.Buffer
	if kind == "card" {
		c := evidence.Card{Title: "Scenario card " + name, Date: scT0.Format(time.DateOnly), Passed: true}
		if err := evidence.WriteJSON(&content, c, evidence.WriteOptions{}); err != nil {
			return err
		}
	} else {
		content.WriteString(`{"not": "a card"}`)
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, err := mw.CreateFormFile("card", name)
	if err == nil {
		_, err = fw.Write(content.Bytes())
	}
	if err == nil {
		err = mw.Close()
	}
	if err != nil {
		return err
	}
	bearer, cookie, err := r.secretFor(st.opt("as", ""))
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(r.ctx, http.MethodPost, base+console.Prefix+"/cards", &form)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if o := st.opt("origin", ""); o != "" {
		req.Header.Set("Origin", o)
	}
	present(req, bearer, cookie)
	dir, err := r.cardsDir()
	if err != nil {
		return err
	}
	before, err := dirPrint(dir)
	if err != nil {
		return err
	}
	rep, err := r.do(req, st.opt("from", ""))
	if err != nil {
		return err
	}
	after, err := dirPrint(dir)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("console upload %s (%s)", name, kind)
	r.tl.add(laneAgent, fmt.Sprintf("%s: %d %s", what, rep.status, rep.code))
	r.reply(fmt.Sprintf("console upload %s -> %d %s", name, rep.status, rep.code))
	if st.arrow[0] != "303" {
		if after != before {
			return fmt.Errorf("%s: refused with %d, yet the cards directory changed:\nbefore %s\nafter  %s", what, rep.status, before, after)
		}
		if err := r.judge(rep, st.arrow); err != nil {
			return fmt.Errorf("%s: want %s: %w", what, strings.Join(st.arrow, " "), err)
		}
		return nil
	}
	stored, err := os.ReadFile(filepath.Join(dir, name))
	switch {
	case rep.status != http.StatusSeeOther:
		return fmt.Errorf("%s: want 303, got %d %s", what, rep.status, trimBody(rep.body))
	case err != nil:
		return fmt.Errorf("%s: answered 303, yet the card was not stored: %w", what, err)
	case !bytes.Equal(stored, content.Bytes()):
		return fmt.Errorf("%s: the stored card is not the bytes uploaded", what)
	}
	r.count("console.uploaded", 1)
	return nil
}

// dirPrint renders a directory's files and their contents' lengths and
// bytes, for a refusal that must leave it as it was.
func dirPrint(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s (%d bytes %x) ", e.Name(), len(data), data[:min(len(data), 32)])
	}
	return b.String(), nil
}

func (r *scRun) consolePages(st scStep) error {
	base, err := r.baseURL(st)
	if err != nil {
		return err
	}
	bearer, cookie, err := r.secretFor(st.opt("as", ""))
	if err != nil {
		return err
	}
	paths := []string{"/", "/queue", "/jobs", "/cards"}
	r.mu.Lock()
	for _, id := range r.jobs {
		paths = append(paths, "/jobs/"+id)
	}
	r.mu.Unlock()
	for _, a := range r.agents {
		paths = append(paths, "/devices/"+a.deviceID)
	}
	slices.Sort(paths[4:])
	secrets := r.secretsSeen(true)
	if len(secrets) == 0 {
		return errors.New("console pages: the run saw no secret to look for")
	}
	var bad []string
	for _, p := range paths {
		req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, base+console.Prefix+p, nil)
		if err != nil {
			return err
		}
		present(req, bearer, cookie)
		rep, err := r.do(req, st.opt("from", ""))
		if err != nil {
			return err
		}
		if rep.status != http.StatusOK {
			return fmt.Errorf("console pages: GET %s%s: %d %s", console.Prefix, p, rep.status, trimBody(rep.body))
		}
		for _, s := range secrets {
			if bytes.Contains(rep.body, []byte(s.value)) {
				bad = append(bad, fmt.Sprintf("%s%s shows %s", console.Prefix, p, s.what))
			}
		}
	}
	r.tl.add(laneAgent, fmt.Sprintf("console pages: %d pages searched for %d secrets and hashes", len(paths), len(secrets)))
	if len(bad) > 0 {
		return fmt.Errorf("console pages hold secrets: %s", strings.Join(bad, "; "))
	}
	r.count("console.pages", int64(len(paths)))
	return nil
}
