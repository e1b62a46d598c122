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
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/store"
)

// The HTTP surface as a device and an operator meet it (SPEC sections 5
// and 6): pairing codes minted as `rendermac admin pair-code` mints them
// and redeemed through POST /v1/provider/pair, device tokens presented at
// the WebSocket upgrade, devices and API keys revoked mid-run. Every
// refusal is checked to have changed nothing.

func init() {
	// Registered here rather than in scenario_run.go's table, next to
	// their handlers; scCommands is initialised before any init runs.
	for name, h := range map[string]scCommand{
		"pair-code": cmdPairCode, "pair": cmdPair, "guesses": cmdGuesses, "dial": cmdDial, "revoke": cmdRevoke, "apikey": cmdAPIKey,
		"receiver": cmdReceiver, "received": cmdReceived,
	} {
		scCommands[name] = h
	}
}

// scSurface is the per-run state of the HTTP surface commands.
type scSurface struct {
	codes     map[string]string            // pairing code name -> the code as the operator printed it
	inputs    map[string]string            // uploaded input name -> its input_id (scenario_input.go)
	uploads   map[string]buyer.InputUpload // uploaded input name -> its declaration's reply (scenario_input.go)
	events    map[string]scEventsCursor    // job name -> where its last `list events` ended (scenario_list.go)
	downloads map[string]scGrant           // job name -> its download grant, as first read (scenario_grant.go)
	receiver  *scReceiver                  // scenario_webhook.go
}

func (r *scRun) surfaceState() *scSurface {
	if r.surface == nil {
		r.surface = &scSurface{codes: map[string]string{}, inputs: map[string]string{}, uploads: map[string]buyer.InputUpload{},
			events: map[string]scEventsCursor{}, downloads: map[string]scGrant{}}
	}
	return r.surface
}

func (s *scSurface) close() {
	if s != nil && s.receiver != nil {
		s.receiver.srv.Close()
	}
}

// cmdPairCode mints a single-use pairing code valid for ttl from the pinned
// clock's now, as `rendermac admin pair-code --ttl` does, and names it;
// `legacy` writes instead the row of a code minted before codes had ids
// (migration 00003: a 12-symbol code, its hash and no code_id).
// Example: pair-code c1 ttl=10m
// Example: pair-code c2 legacy
func cmdPairCode(r *scRun, st scStep) error {
	name := arg(st, 0)
	if name == "" {
		return errors.New("want: pair-code NAME [legacy] [ttl=DURATION]")
	}
	ttl, err := time.ParseDuration(st.opt("ttl", "10m"))
	if err != nil {
		return err
	}
	if arg(st, 1) == "legacy" {
		code := legacyPairingCode()
		if _, err := r.observer.Exec(r.ctx, `INSERT INTO pairing_codes (code_hash, created_at, expires_at) VALUES ($1, $2, $3)`,
			api.HashSecret(api.NormalizePairingCode(code)), r.clock.Now(), r.clock.Now().Add(ttl)); err != nil {
			return fmt.Errorf("pair-code %s legacy: %w", name, err)
		}
		r.surfaceState().codes[name] = code
		r.tl.add(laneDatabase, fmt.Sprintf("a pairing code %s minted before ids (no code_id, only its hash)", name))
		return nil
	}
	code, expires, err := api.CreatePairingCode(r.ctx, r.observer, r.clock.Now(), ttl)
	if err != nil {
		return err
	}
	r.surfaceState().codes[name] = code
	r.tl.add(laneDatabase, fmt.Sprintf("operator minted pairing code %s (ttl %s, expires t0+%s)", name, ttl, expires.Sub(scT0)))
	return r.checkPairingCodeForm(name, code)
}

// pairingCodeForm is a code as the SPEC prints it: six groups of four
// symbols of the 32-symbol alphabet (no 0, 1, I, O).
var pairingCodeForm = regexp.MustCompile(`^[A-HJ-NP-Z2-9]{4}(-[A-HJ-NP-Z2-9]{4}){5}$`)

// checkPairingCodeForm checks a minted code against SPEC section 6: its
// form, its first 8 symbols stored in the clear as the row's code_id, only
// the SHA-256 of the whole (normalized) code stored, and its 16-symbol
// secret nowhere in the row.
func (r *scRun) checkPairingCodeForm(name, code string) error {
	norm := strings.ReplaceAll(code, "-", "")
	var id *string
	var row string
	err := r.observer.QueryRow(r.ctx, `SELECT code_id, t::text FROM pairing_codes t WHERE code_hash = $1`,
		api.HashSecret(norm)).Scan(&id, &row)
	switch {
	case !pairingCodeForm.MatchString(code):
		return fmt.Errorf("pairing code %s %q: want IIII-IIII-SSSS-SSSS-SSSS-SSSS over the 32-symbol alphabet", name, code)
	case err != nil:
		return fmt.Errorf("pairing code %s: no row holds the SHA-256 of the whole code: %w", name, err)
	case id == nil || *id != norm[:8]:
		return fmt.Errorf("pairing code %s: code_id %v, want its first 8 symbols %s", name, id, norm[:8])
	case strings.Contains(row, norm[8:]):
		return fmt.Errorf("pairing code %s: the row holds the code's secret: %s", name, row)
	}
	r.count("pair.code-form", 1)
	return nil
}

// cmdGuesses checks how many wrong secrets a code's row has counted.
// Example: guesses c3 -> 1
func cmdGuesses(r *scRun, st scStep) error {
	code := r.surfaceState().codes[arg(st, 0)]
	if code == "" || len(st.arrow) != 1 {
		return errors.New("want: guesses CODE -> N (after pair-code CODE)")
	}
	var n int
	if err := r.observer.QueryRow(r.ctx, `SELECT wrong_guesses FROM pairing_codes WHERE code_hash = $1`,
		api.HashSecret(api.NormalizePairingCode(code))).Scan(&n); err != nil {
		return fmt.Errorf("guesses %s: %w", arg(st, 0), err)
	}
	r.tl.add(laneDatabase, fmt.Sprintf("row check: pairing code %s counted %d wrong guesses", arg(st, 0), n))
	if strconv.Itoa(n) != st.arrow[0] {
		return fmt.Errorf("guesses %s: the row counted %d wrong guesses, want %s", arg(st, 0), n, st.arrow[0])
	}
	return nil
}

// legacyPairingCode draws a code of the form minted before ids: 12
// symbols of the alphabet in groups of four.
func legacyPairingCode() string {
	const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	raw := make([]byte, 12)
	_, _ = rand.Read(raw)
	var b strings.Builder
	for i, c := range raw {
		if i > 0 && i%4 == 0 {
			b.WriteByte('-')
		}
		b.WriteByte(alphabet[c%32])
	}
	return b.String()
}

// cmdPair has a new device present a pairing code at POST
// /v1/provider/pair and checks the reply's status and code (`paired` for a
// 201 with a device id and token). A paired device becomes agent AGENT,
// which `connect` then dials with the token the reply carried. With
// guess=wrong the device presents the code's id with a wrong secret. A
// refusal must leave the devices as they were.
// With from= the request comes from that client address (clientFrom);
// with form=typed the code is presented in lower case with spaces for
// dashes, as a person types it; body=malformed sends a body that is not
// JSON. A 429 must carry the contract's Retry-After and body and change
// no row at all (the code is not even read).
// Example: pair a1 c1 -> 201 paired
// Example: pair a2 c1 guess=wrong -> 401 invalid_pairing_code
// Example: pair a3 c1 from=203.0.113.9 -> 429 rate_limited retry-after=4
func cmdPair(r *scRun, st scStep) error {
	name, code := arg(st, 0), r.surfaceState().codes[arg(st, 1)]
	if name == "" || code == "" || len(st.arrow) < 2 {
		return errors.New("want: pair AGENT CODE [guess=wrong] [form=typed] [from=ADDR] [services=S,...] -> STATUS paired|CODE (after pair-code CODE)")
	}
	what := "the code"
	if st.opt("guess", "") == "wrong" {
		code, what = wrongSecret(code), "the code's id with a wrong secret"
	}
	if st.opt("form", "") == "typed" {
		code, what = strings.ReplaceAll(strings.ToLower(code), "-", " "), what+" typed in lower case with spaces"
	}
	base, err := r.baseURL(st)
	if err != nil {
		return err
	}
	before, err := r.deviceCount()
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{"code": code, "name": name, "services": strings.Split(st.opt("services", scService), ",")})
	if st.opt("body", "") == "malformed" {
		body, what = []byte(`{"code": `), "a body that is not JSON"
	}
	req, err := http.NewRequestWithContext(r.ctx, http.MethodPost, base+"/v1/provider/pair", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	var rep scReply
	send := func() error {
		rep, err = r.do(req, st.opt("from", ""))
		return err
	}
	if st.arrow[0] == "429" {
		err = r.unchanged("pair "+name, send)
	} else {
		err = send()
	}
	if err != nil {
		return fmt.Errorf("pair: %w", err)
	}
	status, reply := rep.status, rep.body
	var out struct {
		Code        string `json:"code"`
		DeviceID    string `json:"device_id"`
		DeviceToken string `json:"device_token"`
	}
	if err := json.Unmarshal(reply, &out); err != nil {
		return fmt.Errorf("pair: reply %d is not JSON: %s", status, reply)
	}
	got := out.Code
	if status == http.StatusCreated {
		got = "paired"
	}
	r.tl.add(laneAgent, fmt.Sprintf("%s -> POST /v1/provider/pair from %s with %s %s: %d %s", name, orDash(st.opt("from", "")),
		arg(st, 1), what, status, got))
	r.reply(fmt.Sprintf("pair %s %s -> %d %s", name, arg(st, 1), status, got))
	if strconv.Itoa(status) != st.arrow[0] || got != st.arrow[1] {
		return fmt.Errorf("pair %s with %s: want %s, got %d %s", name, what, strings.Join(st.arrow, " "), status, reply)
	}
	if status == http.StatusTooManyRequests {
		if err := r.judge(rep, append([]string{st.arrow[0]}, st.arrow[2:]...)); err != nil {
			return fmt.Errorf("pair %s: %w", name, err)
		}
	}
	after, err := r.deviceCount()
	if err != nil {
		return err
	}
	if got != "paired" {
		if after != before {
			return fmt.Errorf("pair %s: refused, yet the devices went from %d to %d", name, before, after)
		}
		r.count("pair.refused", 1)
		return nil
	}
	if !protocol.ValidID(out.DeviceID) || out.DeviceToken == "" || after != before+1 {
		return fmt.Errorf("pair %s: a 201 must carry a new device's id and token and add one device (%d -> %d): %s",
			name, before, after, reply)
	}
	if r.agents[name] != nil {
		return fmt.Errorf("pair: agent %s already exists", name)
	}
	r.agents[name] = &scAgent{name: name, deviceID: out.DeviceID, token: out.DeviceToken, slots: 1, held: map[string]string{}}
	r.setName(out.DeviceID, name)
	r.count("pair.paired", 1)
	return nil
}

// wrongSecret keeps a formatted code's id (its first two groups) and moves
// every symbol of its secret one place along the alphabet: a code that
// names the live code's id, with a secret that is certainly wrong.
func wrongSecret(code string) string {
	const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789" // SPEC section 6
	b := []byte(code)
	for i := len("IIII-IIII-"); i < len(b); i++ {
		if j := strings.IndexByte(alphabet, b[i]); j >= 0 {
			b[i] = alphabet[(j+1)%len(alphabet)]
		}
	}
	return string(b)
}

func (r *scRun) deviceCount() (int, error) {
	var n int
	err := r.observer.QueryRow(r.ctx, `SELECT count(*) FROM devices`).Scan(&n)
	return n, err
}

// cmdDial opens GET /v1/provider/ws with a device token and requires the
// upgrade to be refused with the status and code after `->`: token=own
// (default) is the agent's own token, unknown one no device has, hash the
// hash its device row stores (a leaked row is not a credential). With
// then=revoke the upgrade must succeed; the device is then revoked before
// its hello, and the session must be closed with the code after `closed`.
// With from= (a 127.0.0.0/8 address) the connection comes from that
// client address; `-> upgraded` wants the upgrade, and closes the session
// at once, before any hello. A 429 must carry the contract's Retry-After
// and body and change no row (no session, no heartbeat).
// Example: dial a1 token=unknown -> 401 unauthorized
// Example: dial a3 then=revoke -> closed 1008
// Example: dial a1 from=127.0.0.7 -> 429 rate_limited retry-after=20
// Example: dial a1 -> upgraded
func cmdDial(r *scRun, st scStep) error {
	a := r.agents[arg(st, 0)]
	if a == nil || (len(st.arrow) < 2 && strings.Join(st.arrow, " ") != "upgraded") {
		return errors.New("want: dial AGENT [token=own|unknown|hash] [then=revoke] [gateway=G] [from=ADDR] -> STATUS CODE | closed CODE | upgraded")
	}
	if st.opt("then", "") == "revoke" {
		return r.revokeBeforeHello(a, st)
	}
	which := st.opt("token", "own")
	token := a.token
	switch which {
	case "own":
	case "unknown":
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		token = "rmd_" + base64.RawURLEncoding.EncodeToString(b)
	case "hash":
		if err := r.observer.QueryRow(r.ctx, `SELECT token_hash FROM devices WHERE id = $1`, a.deviceID).Scan(&token); err != nil {
			return fmt.Errorf("dial: read %s's token hash: %w", a.name, err)
		}
	default:
		return fmt.Errorf("dial: token=%s: want own, unknown or hash", which)
	}
	gwName := st.opt("gateway", "gw1")
	base, err := r.baseURL(scStep{kv: map[string]string{"via": gwName}})
	if err != nil {
		return err
	}
	from := st.opt("from", "")
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	var c *deviceclient.Client
	var resp *http.Response
	dial := func() error {
		url := deviceclient.WSURL(base, protocol.SessionPath)
		if from != "" {
			c, resp, err = deviceclient.DialFrom(ctx, url, token, from)
		} else {
			c, resp, err = deviceclient.Dial(ctx, url, token)
		}
		return nil
	}
	if st.arrow[0] == "429" {
		if uerr := r.unchanged("dial "+a.name, dial); uerr != nil {
			if c != nil {
				c.Close()
			}
			return uerr
		}
	} else {
		_ = dial()
	}
	if err == nil {
		c.Close()
		r.tl.add(laneAgent, fmt.Sprintf("%s dialled %s from %s with its %s token: upgraded", a.name, gwName, orDash(from), which))
		if strings.Join(st.arrow, " ") == "upgraded" {
			r.count("dial.upgraded", 1)
			return nil
		}
		return fmt.Errorf("dial %s with its %s token: the gateway upgraded the connection, want %s",
			a.name, which, strings.Join(st.arrow, " "))
	}
	if resp == nil {
		return fmt.Errorf("dial %s: no reply: %w", a.name, err)
	}
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	rep := scReply{status: resp.StatusCode, header: resp.Header, body: reply, code: "-"}
	var refusal struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(reply, &refusal) == nil && refusal.Code != "" {
		rep.code = refusal.Code
	}
	r.tl.add(laneAgent, fmt.Sprintf("%s dialled %s from %s with its %s token: %d %s", a.name, gwName, orDash(from), which, resp.StatusCode, rep.code))
	r.reply(fmt.Sprintf("dial %s %s -> %d %s", a.name, which, resp.StatusCode, rep.code))
	if err := r.judge(rep, st.arrow); err != nil {
		return fmt.Errorf("dial %s with its %s token: want %s: %w", a.name, which, strings.Join(st.arrow, " "), err)
	}
	r.count("dial.refused", 1)
	return nil
}

// cmdRevoke revokes an agent's device (as `rendermac admin revoke-device`)
// or the scenario buyer's API key, the one every buyer step uses.
// Example: revoke device a1
// Example: revoke key
func cmdRevoke(r *scRun, st scStep) error {
	switch arg(st, 0) {
	case "device":
		a := r.agents[arg(st, 1)]
		if a == nil {
			return fmt.Errorf("revoke device: no agent %q", arg(st, 1))
		}
		if err := r.admin.RevokeDevice(r.ctx, a.deviceID); err != nil {
			return err
		}
		r.tl.add(laneDatabase, "operator revoked device "+a.name)
		return nil
	case "key":
		tag, err := r.observer.Exec(r.ctx, `UPDATE api_keys SET revoked_at = now() WHERE key_hash = $1 AND revoked_at IS NULL`,
			api.HashSecret(r.apiKey))
		if err != nil {
			return fmt.Errorf("revoke key: %w", err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("revoke key: %d keys revoked, want the buyer's one", tag.RowsAffected())
		}
		r.tl.add(laneDatabase, "operator revoked the buyer's API key")
		return nil
	}
	return errors.New("want: revoke device AGENT | revoke key")
}

// cmdAPIKey sends one buyer request with the buyer's own API key and
// checks the status and code after `->`. OP is create (a job named JOB),
// get, events, cancel or list. A refused request must change nothing:
// jobs, attempts, money and journal are compared before and after.
// Example: apikey create j3 -> 401 unauthorized
// Example: apikey cancel j1 -> 401 unauthorized
func cmdAPIKey(r *scRun, st scStep) error {
	op, job := arg(st, 0), arg(st, 1)
	if len(st.arrow) < 1 {
		return errors.New("want: apikey create|get|events|cancel|list [JOB] -> STATUS [CODE]")
	}
	gw, err := r.stack(st.opt("via", "gw1"))
	if err != nil {
		return err
	}
	before, err := r.rowsPrint()
	if err != nil {
		return err
	}
	b := r.buyer(gw.baseURL(), r.apiKey)
	status := http.StatusOK
	id := ""
	if op != "create" && op != "list" {
		if id, err = r.jobID(job); err != nil {
			return err
		}
	}
	switch op {
	case "create":
		if _, taken := r.jobs[job]; taken || job == "" {
			return fmt.Errorf("apikey create: want a new job name, got %q", job)
		}
		req := client.CreateRequest{Service: scService, Params: map[string]string{"seed": job}, Input: []byte("input of " + job),
			NoIdempotencyKey: true}
		var created client.Created
		created, err = b.Create(r.ctx, req)
		d := created.Job
		status = created.Status
		if err == nil {
			r.mu.Lock()
			r.jobs[job] = d.ID
			r.mu.Unlock()
			r.setName(d.ID, job)
		}
	case "get":
		_, err = b.Get(r.ctx, id)
	case "events":
		_, err = b.EventsPage(r.ctx, id, 0, "")
	case "cancel":
		var c client.Cancellation
		c, err = b.Cancel(r.ctx, id)
		status = c.Status
	case "list":
		_, err = b.ListPage(r.ctx, client.ListOptions{})
	default:
		return fmt.Errorf("apikey: unknown op %q (want create, get, events, cancel or list)", op)
	}
	status, code, err := replyOf(status, err)
	if err != nil {
		return err
	}
	r.tl.add(laneGateway, fmt.Sprintf("buyer's key -> %s %s: %d %s", op, job, status, code))
	r.reply(strings.TrimSpace(fmt.Sprintf("apikey %s -> %d %s", op, status, code)))
	if strconv.Itoa(status) != st.arrow[0] || (len(st.arrow) > 1 && code != st.arrow[1]) {
		return fmt.Errorf("apikey %s %s: want %s, got %d %s", op, job, strings.Join(st.arrow, " "), status, code)
	}
	if status/100 == 2 {
		return nil
	}
	after, err := r.rowsPrint()
	if err != nil {
		return err
	}
	if after != before {
		return fmt.Errorf("apikey %s %s: refused with %d, yet the rows changed:\nbefore %s\nafter  %s", op, job, status, before, after)
	}
	r.count("apikey.refused", 1)
	return nil
}

// rowsPrint renders what a refused request must not change: every job,
// attempt and buyer row, and the journal's length.
func (r *scRun) rowsPrint() (string, error) {
	snap, err := store.Snapshot(r.ctx, r.observer)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("jobs=%v attempts=%v buyers=%v journal=%d", snap.Jobs, snap.Attempts, snap.Buyers, len(snap.Journal)), nil
}

// revokeBeforeHello dials with the agent's own token, revokes its device
// once upgraded, says hello, and requires the close code after `closed`.
func (r *scRun) revokeBeforeHello(a *scAgent, st scStep) error {
	if st.arrow[0] != "closed" {
		return errors.New("want: dial AGENT then=revoke -> closed CODE")
	}
	gw, err := r.stack(st.opt("gateway", "gw1"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	c, _, err := deviceclient.Dial(ctx, gw.wsURL(), a.token)
	if err != nil {
		return fmt.Errorf("dial %s with its own token, before its revocation: %w", a.name, err)
	}
	a.clients = append(a.clients, c)
	if err := r.admin.RevokeDevice(r.ctx, a.deviceID); err != nil {
		return err
	}
	r.tl.add(laneAgent, fmt.Sprintf("%s upgraded on %s; operator revokes its device before its hello", a.name, gw.name))
	w, err := c.Hello(ctx, []string{scService}, a.slots, a.slots)
	if err == nil {
		return fmt.Errorf("dial %s: a device revoked before its hello was welcomed: %+v", a.name, w)
	}
	code, err := c.Wait(ctx)
	if err != nil {
		return fmt.Errorf("dial %s: hello after revocation: %w", a.name, err)
	}
	r.tl.add(laneAgent, fmt.Sprintf("%s <- closed %d after its hello", a.name, code))
	r.reply(fmt.Sprintf("dial %s revoked before hello -> closed %d", a.name, code))
	if strconv.Itoa(int(code)) != st.arrow[1] {
		return fmt.Errorf("dial %s: a device revoked before its hello: want close %s, got %d", a.name, st.arrow[1], code)
	}
	r.count("dial.refused", 1)
	return nil
}
