package scenarios

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/ratelimit"
)

// The abuse limits as a client meets them (SPEC section 6, "Abuse limits";
// docs/semantics.md, "Abuse limits and pairing"): stacks run the limits of
// the script's `limits:` header, judged at a limiter clock of the run's own
// (`limiter advance`), never at the pinned decision clock; requests come
// from any client address (a 127.0.0.0/8 source address, or through the
// harness as a trusted proxy naming the client in X-Forwarded-For); every
// 429 is checked to carry Retry-After and the contract's body, and to have
// changed nothing.

func init() {
	for name, h := range map[string]scCommand{
		"limiter": cmdLimiter, "request": cmdRequest, "api-key": cmdAPIKeyNamed,
	} {
		scCommands[name] = h
	}
}

// scOps is the per-run state of the operations commands (limits, console,
// metrics, traces), made on first use.
type scOps struct {
	limClock  *clock.Stub
	keys      map[string]string       // api-key NAME -> its plaintext
	clients   map[string]*http.Client // by local source address
	operators map[string]*scOperator
	cookies   map[string]*http.Cookie
	watches   map[string]*scWatch
	servers   map[string]*scServe
	tokens    map[string]string // metrics token NAME -> its plaintext
	receivers map[string]*scOTLP
	remote    map[string]bool // stacks whose console serves any peer
}

func (r *scRun) opsState() *scOps {
	if r.ops == nil {
		r.ops = &scOps{keys: map[string]string{}, clients: map[string]*http.Client{}, operators: map[string]*scOperator{},
			cookies: map[string]*http.Cookie{}, watches: map[string]*scWatch{}, servers: map[string]*scServe{},
			tokens: map[string]string{}, receivers: map[string]*scOTLP{}, remote: map[string]bool{}}
		if r.s.limits != nil {
			r.ops.limClock = clock.NewStub(scT0)
		}
	}
	return r.ops
}

func (o *scOps) close() {
	if o == nil {
		return
	}
	for _, w := range o.watches {
		w.stop()
	}
	for _, s := range o.servers {
		_ = s.stop()
	}
	for _, rc := range o.receivers {
		rc.srv.Close()
	}
	for _, c := range o.clients {
		c.CloseIdleConnections()
	}
}

// parseLimits reads the `limits:` header: "defaults", or comma-separated
// NAME=RULE and keys=N.
func parseLimits(val string) (ratelimit.Limits, error) {
	var l ratelimit.Limits
	if strings.TrimSpace(val) == "defaults" {
		return l.WithDefaults(), nil
	}
	rules := map[string]*ratelimit.Rule{"pair": &l.PairPerIP, "auth": &l.AuthFailuresPerIP, "jobs": &l.JobsPerBuyer,
		"connects-ip": &l.ConnectsPerIP, "connects-device": &l.ConnectsPerDevice}
	for part := range strings.SplitSeq(val, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if k == "keys" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return l, fmt.Errorf("limits: keys=%s: want a positive count", v)
			}
			l.MaxKeys = n
			continue
		}
		rule := rules[k]
		if !ok || rule == nil {
			return l, fmt.Errorf("limits: %q: want defaults or NAME=RULE with NAME pair, auth, jobs, connects-ip, connects-device or keys", part)
		}
		if err := rule.Set(v); err != nil {
			return l, fmt.Errorf("limits: %s: %w", k, err)
		}
	}
	return l.WithDefaults(), nil
}

// stackLimits are the abuse limits every stack of the run is given.
func (r *scRun) stackLimits() ratelimit.Limits {
	if r.s.limits == nil {
		return ratelimit.Limits{}
	}
	l := *r.s.limits
	l.Clock = r.opsState().limClock
	return l
}

// cmdLimiter moves the limiter clock the stacks judge their buckets at
// (the decision clock, `advance`, does not refill them); `limiter bound`
// fills a limiter built as the API builds one with the default key bound
// with one busy key more than the bound after `->`, and wants exactly the
// bound remembered, the first (least recently used) key forgotten and so
// let in again.
// Example: limiter advance 20s
// Example: limiter bound -> 100000
func cmdLimiter(r *scRun, st scStep) error {
	if arg(st, 0) == "bound" {
		return r.limiterBound(st)
	}
	d, err := time.ParseDuration(arg(st, 1))
	if arg(st, 0) != "advance" || err != nil || d <= 0 {
		return errors.New("want: limiter advance DURATION")
	}
	c := r.opsState().limClock
	if c == nil {
		return errors.New("limiter advance: the script has no `limits:` header, so the stacks judge at the wall clock")
	}
	c.Advance(d)
	r.tl.add(laneGateway, fmt.Sprintf("limiter clock advanced %s (t0+%s)", d, c.Now().Sub(scT0)))
	return nil
}

func (r *scRun) limiterBound(st scStep) error {
	bound, err := strconv.Atoi(arg(scStep{args: st.arrow}, 0))
	if err != nil || bound < 1 {
		return errors.New("want: limiter bound -> KEYS")
	}
	l := ratelimit.Limits{Clock: clock.NewStub(scT0)}.WithDefaults()
	k := l.Keyed(ratelimit.Rule{N: 1, Per: time.Minute})
	for i := range bound + 1 {
		k.Allow(strconv.Itoa(i)) // one event: the key is busy for a minute
	}
	remembered, forgotten := k.Len(), k.Forgotten()
	ok, _ := k.Allow("0")
	r.tl.add(laneGateway, fmt.Sprintf("limiter of the default key bound after %d busy keys: %d remembered, %d forgotten, the first let in again: %v",
		bound+1, remembered, forgotten, ok))
	if remembered != bound || forgotten != 1 || !ok {
		return fmt.Errorf("limiter bound: after %d busy keys %d are remembered and %d forgotten (the first let in again: %v); want %d and 1, and yes",
			bound+1, remembered, forgotten, ok, bound)
	}
	r.count("limit.bound", 1)
	return nil
}

// cmdAPIKeyNamed mints another API key of the scenario buyer, or revokes
// one minted so, for `request ... as=key:NAME`.
// Example: api-key k2
// Example: api-key k2 revoke
func cmdAPIKeyNamed(r *scRun, st scStep) error {
	o, name := r.opsState(), arg(st, 0)
	switch {
	case name == "":
		return errors.New("want: api-key NAME [revoke]")
	case arg(st, 1) == "revoke":
		key := o.keys[name]
		if key == "" {
			return fmt.Errorf("api-key %s revoke: no such key", name)
		}
		tag, err := r.observer.Exec(r.ctx, `UPDATE api_keys SET revoked_at = now() WHERE key_hash = $1 AND revoked_at IS NULL`, api.HashSecret(key))
		if err != nil || tag.RowsAffected() != 1 {
			return fmt.Errorf("api-key %s revoke: %v (%d rows)", name, err, tag.RowsAffected())
		}
		r.tl.add(laneDatabase, "operator revoked API key "+name)
		return nil
	case o.keys[name] != "":
		return fmt.Errorf("api-key %s: minted already", name)
	}
	key, err := api.CreateAPIKey(r.ctx, r.observer, scBuyerID)
	if err != nil {
		return err
	}
	o.keys[name] = key
	r.tl.add(laneDatabase, "operator minted API key "+name)
	return nil
}

// clientFrom returns the client and the X-Forwarded-For value that make a
// request come from address from: "" is the harness itself (127.0.0.1); a
// 127.0.0.0/8 address is used as the connection's source address (every
// one reaches a loopback listener on Linux); any other address is named in
// X-Forwarded-For, which the stacks believe only when the script's
// `proxies:` trusts the harness.
func (r *scRun) clientFrom(from string) (*http.Client, string, error) {
	if from == "" {
		return r.httpc, "", nil
	}
	a, err := netip.ParseAddr(from)
	if err != nil {
		return nil, "", fmt.Errorf("from=%s: not an address", from)
	}
	if !a.Is4() || !netip.MustParsePrefix("127.0.0.0/8").Contains(a) {
		return r.httpc, from, nil
	}
	o := r.opsState()
	if c := o.clients[from]; c != nil {
		return c, "", nil
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IP(a.AsSlice())}, Timeout: r.timeout}
	c := &http.Client{Timeout: r.timeout, Transport: &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	o.clients[from] = c
	return c, "", nil
}

// scReply is one HTTP answer as the commands judge it.
type scReply struct {
	status int
	header http.Header
	body   []byte
	code   string // the JSON body's code, or "-"
}

// do sends one request from address from (see clientFrom); redirects are
// never followed, so a 303 is judged as sent.
func (r *scRun) do(req *http.Request, from string) (scReply, error) {
	c, xff, err := r.clientFrom(from)
	if err != nil {
		return scReply{}, err
	}
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	if c == r.httpc {
		nc := *r.httpc
		nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		c = &nc
	}
	resp, err := c.Do(req)
	if err != nil {
		return scReply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	rep := scReply{status: resp.StatusCode, header: resp.Header, body: body, code: "-"}
	var e struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(body, &e) == nil && e.Code != "" {
		rep.code = e.Code
	}
	return rep, err
}

// rateLimitMessage is the 429 body's message (SPEC section 6).
var rateLimitMessage = regexp.MustCompile(`^too many (.+); retry after ([0-9]+)s$`)

// checkRateLimited checks a 429 against SPEC section 6: a Retry-After of
// whole seconds (at least 1; want, when not "", exactly), and the body
// {"code":"rate_limited","message":"too many <what>; retry after <N>s"}
// with N that Retry-After.
func checkRateLimited(rep scReply, want string) error {
	ra := rep.header.Get("Retry-After")
	secs, err := strconv.Atoi(ra)
	var body map[string]string
	jerr := json.Unmarshal(rep.body, &body)
	m := rateLimitMessage.FindStringSubmatch(body["message"])
	switch {
	case rep.status != http.StatusTooManyRequests:
		return fmt.Errorf("want 429, got %d %s", rep.status, rep.body)
	case err != nil || secs < 1:
		return fmt.Errorf("429 with Retry-After %q: want whole seconds, at least 1", ra)
	case want != "" && ra != want:
		return fmt.Errorf("429 with Retry-After %s, want %s", ra, want)
	case !strings.HasPrefix(rep.header.Get("Content-Type"), "application/json"):
		return fmt.Errorf("429 with Content-Type %q, want JSON", rep.header.Get("Content-Type"))
	case jerr != nil || len(body) != 2 || body["code"] != ratelimitCode || m == nil:
		return fmt.Errorf("429 body %s: want {\"code\":%q,\"message\":\"too many <what>; retry after <N>s\"}", rep.body, ratelimitCode)
	case m[2] != ra:
		return fmt.Errorf("429 body says retry after %ss, its Retry-After %s", m[2], ra)
	}
	return nil
}

// ratelimitCode is the code of a refused request, as the SPEC words it.
const ratelimitCode = "rate_limited"

// worldPrint renders every row a refused request must leave as it was:
// jobs, attempts, buyers and the journal's length (rowsPrint), and the
// devices, pairing codes, API keys, operators and webhook outbox whole.
func (r *scRun) worldPrint() (string, error) {
	rows, err := r.rowsPrint()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(rows)
	for _, table := range []string{"devices", "pairing_codes", "api_keys", "operators", "webhook_outbox"} {
		var agg string
		if err := r.observer.QueryRow(r.ctx, `SELECT coalesce(string_agg(t::text, ' | ' ORDER BY t::text), '') FROM `+table+` t`).
			Scan(&agg); err != nil {
			return "", fmt.Errorf("snapshot %s: %w", table, err)
		}
		fmt.Fprintf(&b, "\n%s: %s", table, agg)
	}
	return b.String(), nil
}

// unchanged runs send and fails when the world's rows moved meanwhile.
func (r *scRun) unchanged(what string, send func() error) error {
	before, err := r.worldPrint()
	if err != nil {
		return err
	}
	if err := send(); err != nil {
		return err
	}
	after, err := r.worldPrint()
	if err != nil {
		return err
	}
	if after != before {
		return fmt.Errorf("%s: refused, yet the rows changed:\nbefore %s\nafter  %s", what, before, after)
	}
	return nil
}

// secretFor resolves who= to what a request presents: an Authorization
// header value and/or a cookie.
//
//	none               nothing
//	buyer              the scenario buyer's API key
//	key:NAME           an `api-key NAME` key (revoked or not)
//	wrong              an API key no buyer has
//	device:AGENT       the agent's device token
//	operator:NAME      an `operator new NAME` credential (revoked or not)
//	operator-wrong     an operator credential no operator has
//	cookie:NAME        the session cookie of `console login NAME` (or a
//	                   `console tamper ... as=NAME` copy)
//	metrics:NAME       a `serve ... token=NAME` metrics token
func (r *scRun) secretFor(who string) (bearer string, cookie *http.Cookie, err error) {
	o := r.opsState()
	kind, name, _ := strings.Cut(who, ":")
	switch kind {
	case "", "none":
		return "", nil, nil
	case "buyer":
		return r.apiKey, nil, nil
	case "wrong":
		return "rmk_" + randomB64(32), nil, nil
	case "operator-wrong":
		return "rmo_" + randomB64(32), nil, nil
	case "key":
		if k := o.keys[name]; k != "" {
			return k, nil, nil
		}
	case "device":
		if a := r.agents[name]; a != nil {
			return a.token, nil, nil
		}
	case "operator":
		if op := o.operators[name]; op != nil {
			return op.credential, nil, nil
		}
	case "cookie":
		if c := o.cookies[name]; c != nil {
			return "", c, nil
		}
	case "metrics":
		if t := o.tokens[name]; t != "" {
			return t, nil, nil
		}
	}
	return "", nil, fmt.Errorf("as=%s: no such credential (see secretFor)", who)
}

// present puts what secretFor resolved on req: the bearer secret, the
// session cookie, either or neither.
func present(req *http.Request, bearer string, cookie *http.Cookie) {
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
}

func randomB64(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// baseURL resolves via= to a stack's or an in-process server's URL;
// listener=metrics takes a server's metrics listener.
func (r *scRun) baseURL(st scStep) (string, error) {
	via := st.opt("via", "gw1")
	if s := r.opsState().servers[via]; s != nil {
		if st.opt("listener", "") == "metrics" {
			if s.plane.MetricsAddr == "" {
				return "", fmt.Errorf("server %s has no metrics listener", via)
			}
			return "http://" + s.plane.MetricsAddr, nil
		}
		return s.plane.BaseURL, nil
	}
	if st.opt("listener", "") != "" {
		return "", fmt.Errorf("listener= applies to a `serve` server, not %s", via)
	}
	gw, err := r.stack(via)
	if err != nil {
		return "", err
	}
	return gw.baseURL(), nil
}

// cmdRequest (`request`) sends one request and checks its status, its JSON body's code
// ("-": not JSON; "login": the console's login page) and, for a 429, its
// Retry-After and body (checkRateLimited). Options: as= (secretFor),
// from= (clientFrom), via= and listener= (baseURL), body=job:NAME (a job
// creation of service=, default synthetic.mp4; NAME is then the job) or
// body=malformed, idem=KEY (Idempotency-Key), accept=json, repeat=N (N
// requests, each answered so). A refused request (4xx) must change no
// row, unless the step says changes=ok.
// Example: request POST /v1/jobs body=job:j3 idem=k1 -> 429 rate_limited retry-after=5
// Example: request GET /console/ as=device:a1 accept=json -> 403 forbidden
// Example: request GET /metrics via=s1 listener=metrics -> 200
func cmdRequest(r *scRun, st scStep) error {
	method, path := arg(st, 0), arg(st, 1)
	if method == "" || !strings.HasPrefix(path, "/") || len(st.arrow) < 1 {
		return errors.New("want: request METHOD PATH [as=WHO] [from=ADDR] [via=G] [body=job:NAME|malformed] [idem=KEY] [accept=json] -> STATUS [CODE] [retry-after=N]")
	}
	base, err := r.baseURL(st)
	if err != nil {
		return err
	}
	var body []byte
	job := ""
	switch b := st.opt("body", ""); {
	case b == "malformed":
		body = []byte(`{"service": `)
	case strings.HasPrefix(b, "job:"):
		job = strings.TrimPrefix(b, "job:")
		svc, params := st.opt("service", scService), map[string]string{}
		if svc == scService {
			params["seed"] = job
		}
		body, _ = json.Marshal(map[string]any{"service": svc, "params": params, "input_base64": []byte("input of " + job)})
	case b != "":
		return fmt.Errorf("body=%s: want job:NAME or malformed", b)
	}
	bearer, cookie, err := r.secretFor(st.opt("as", "buyer"))
	if err != nil {
		return err
	}
	repeat, err := optInt(st, "repeat", 1)
	if err != nil || repeat < 1 {
		return fmt.Errorf("repeat=%s: want a positive count", st.opt("repeat", ""))
	}
	var rep scReply
	send := func() error {
		for range repeat {
			req, err := http.NewRequestWithContext(r.ctx, method, base+path, bytes.NewReader(body))
			if err != nil {
				return err
			}
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			present(req, bearer, cookie)
			if k := st.opt("idem", ""); k != "" {
				req.Header.Set("Idempotency-Key", k)
			}
			if st.opt("accept", "") == "json" {
				req.Header.Set("Accept", "application/json")
			}
			if rep, err = r.do(req, st.opt("from", "")); err != nil {
				return err
			}
			if err := r.judge(rep, st.arrow); err != nil {
				return err // an earlier request of the repeat already differs
			}
		}
		return nil
	}
	want := strings.Join(st.arrow, " ")
	what := fmt.Sprintf("%s %s as %s from %s", method, path, st.opt("as", "buyer"), orDash(st.opt("from", "")))
	if repeat > 1 {
		what = fmt.Sprintf("%d x %s", repeat, what)
	}
	refusal := st.arrow[0] >= "400" && st.arrow[0] < "500" && st.opt("changes", "") != "ok"
	if refusal {
		err = r.unchanged(what, send)
	} else {
		err = send()
	}
	if rep.status != 0 {
		r.tl.add(laneAgent, fmt.Sprintf("%s: %d %s", what, rep.status, rep.code))
		r.reply(fmt.Sprintf("http %s %s -> %d %s", method, path, rep.status, rep.code))
	}
	if err != nil {
		return fmt.Errorf("%s: want %s: %w", what, want, err)
	}
	if job != "" && (rep.status == http.StatusCreated || rep.status == http.StatusOK) {
		if err := r.nameCreated(job, rep); err != nil {
			return err
		}
	}
	r.count("http."+strconv.Itoa(rep.status), 1)
	return nil
}

// judge compares a reply with an expectation: STATUS [CODE] [retry-after=N].
func (r *scRun) judge(rep scReply, arrow []string) error {
	if strconv.Itoa(rep.status) != arrow[0] {
		return fmt.Errorf("got %d %s", rep.status, trimBody(rep.body))
	}
	retryAfter := ""
	for _, w := range arrow[1:] {
		if v, ok := strings.CutPrefix(w, "retry-after="); ok {
			retryAfter = v
			continue
		}
		switch {
		case w == "login":
			if !strings.HasPrefix(rep.header.Get("Content-Type"), "text/html") || !bytes.Contains(rep.body, []byte(`name="credential"`)) {
				return fmt.Errorf("got %d without the login page: %s", rep.status, trimBody(rep.body))
			}
		case w != rep.code:
			return fmt.Errorf("got %d %s: %s", rep.status, rep.code, trimBody(rep.body))
		}
	}
	if rep.status == http.StatusTooManyRequests {
		if err := checkRateLimited(rep, retryAfter); err != nil {
			return err
		}
		r.count("limit.429", 1)
	}
	return nil
}

// nameCreated names the job a 201 (or a replay's 200) carries.
func (r *scRun) nameCreated(name string, rep scReply) error {
	var d struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(rep.body, &d); err != nil || d.ID == "" {
		return fmt.Errorf("a %d job reply without an id: %s", rep.status, trimBody(rep.body))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.jobs[name]; ok && old != d.ID {
		return fmt.Errorf("job %s: a replay answered job %s, not the job first created (%s)", name, d.ID, old)
	}
	r.jobs[name] = d.ID
	r.names[d.ID] = name
	return nil
}

func trimBody(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// waitCtx is a context bounded by the run's frame timeout.
func (r *scRun) waitCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.ctx, r.timeout)
}
