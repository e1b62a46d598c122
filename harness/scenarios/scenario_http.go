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
	"strconv"
	"strings"
	"time"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/harness/loadgen"
	"github.com/rendermac/rendermac/protocol"
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
		"pair-code": cmdPairCode, "pair": cmdPair, "dial": cmdDial, "revoke": cmdRevoke, "apikey": cmdAPIKey,
		"receiver": cmdReceiver, "received": cmdReceived,
	} {
		scCommands[name] = h
	}
}

// scSurface is the per-run state of the HTTP surface commands.
type scSurface struct {
	codes     map[string]string          // pairing code name -> the code as the operator printed it
	inputs    map[string]string          // uploaded input name -> its input_id (scenario_input.go)
	uploads   map[string]api.InputUpload // uploaded input name -> its declaration's reply (scenario_input.go)
	events    map[string]scEventsCursor  // job name -> where its last `list events` ended (scenario_list.go)
	downloads map[string]scGrant         // job name -> its download grant, as first read (scenario_grant.go)
	receiver  *scReceiver                // scenario_webhook.go
}

func (r *scRun) surfaceState() *scSurface {
	if r.surface == nil {
		r.surface = &scSurface{codes: map[string]string{}, inputs: map[string]string{}, uploads: map[string]api.InputUpload{},
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
// clock's now, as `rendermac admin pair-code --ttl` does, and names it.
// Example: pair-code c1 ttl=10m
func cmdPairCode(r *scRun, st scStep) error {
	name := arg(st, 0)
	if name == "" {
		return errors.New("want: pair-code NAME [ttl=DURATION]")
	}
	ttl, err := time.ParseDuration(st.opt("ttl", "10m"))
	if err != nil {
		return err
	}
	code, expires, err := api.CreatePairingCode(r.ctx, r.observer, r.clock.Now(), ttl)
	if err != nil {
		return err
	}
	r.surfaceState().codes[name] = code
	r.tl.add(laneDatabase, fmt.Sprintf("operator minted pairing code %s (ttl %s, expires t0+%s)", name, ttl, expires.Sub(scT0)))
	return nil
}

// cmdPair has a new device present a pairing code at POST
// /v1/provider/pair and checks the reply's status and code (`paired` for a
// 201 with a device id and token). A paired device becomes agent AGENT,
// which `connect` then dials with the token the reply carried. With
// guess=wrong the device presents the code's id with a wrong secret. A
// refusal must leave the devices as they were.
// Example: pair a1 c1 -> 201 paired
// Example: pair a2 c1 guess=wrong -> 401 invalid_pairing_code
func cmdPair(r *scRun, st scStep) error {
	name, code := arg(st, 0), r.surfaceState().codes[arg(st, 1)]
	if name == "" || code == "" || len(st.arrow) != 2 {
		return errors.New("want: pair AGENT CODE [guess=wrong] [services=S,...] -> STATUS paired|CODE (after pair-code CODE)")
	}
	what := "the code"
	if st.opt("guess", "") == "wrong" {
		code, what = wrongSecret(code), "the code's id with a wrong secret"
	}
	gw, err := r.stack(st.opt("via", "gw1"))
	if err != nil {
		return err
	}
	before, err := r.deviceCount()
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{"code": code, "name": name, "services": strings.Split(st.opt("services", scService), ",")})
	status, reply, err := r.postJSON(gw.baseURL()+"/v1/provider/pair", body)
	if err != nil {
		return fmt.Errorf("pair: %w", err)
	}
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
	r.tl.add(laneAgent, fmt.Sprintf("%s -> POST /v1/provider/pair with %s %s: %d %s", name, arg(st, 1), what, status, got))
	r.reply(fmt.Sprintf("pair %s %s -> %d %s", name, arg(st, 1), status, got))
	if strconv.Itoa(status) != st.arrow[0] || got != st.arrow[1] {
		return fmt.Errorf("pair %s with %s: want %s, got %d %s", name, what, strings.Join(st.arrow, " "), status, reply)
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

// postJSON POSTs body and returns the status and (the first 64 KiB of) the
// reply.
func (r *scRun) postJSON(url string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(r.ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.httpc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, reply, err
}

// cmdDial opens GET /v1/provider/ws with a device token and requires the
// upgrade to be refused with the status and code after `->`: token=own
// (default) is the agent's own token, unknown one no device has, hash the
// hash its device row stores (a leaked row is not a credential). With
// then=revoke the upgrade must succeed; the device is then revoked before
// its hello, and the session must be closed with the code after `closed`.
// Example: dial a1 token=unknown -> 401 unauthorized
// Example: dial a3 then=revoke -> closed 1008
func cmdDial(r *scRun, st scStep) error {
	a := r.agents[arg(st, 0)]
	if a == nil || len(st.arrow) != 2 {
		return errors.New("want: dial AGENT [token=own|unknown|hash] [then=revoke] [gateway=G] -> STATUS CODE | closed CODE")
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
	gw, err := r.stack(st.opt("gateway", "gw1"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	c, resp, err := deviceclient.Dial(ctx, gw.wsURL(), token)
	if err == nil {
		c.Close()
		r.tl.add(laneAgent, fmt.Sprintf("%s dialled %s with its %s token: upgraded", a.name, gw.name, which))
		return fmt.Errorf("dial %s with its %s token: the gateway upgraded the connection, want %s",
			a.name, which, strings.Join(st.arrow, " "))
	}
	if resp == nil {
		return fmt.Errorf("dial %s: no reply: %w", a.name, err)
	}
	var refusal struct {
		Code string `json:"code"`
	}
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	_ = json.Unmarshal(reply, &refusal)
	r.tl.add(laneAgent, fmt.Sprintf("%s dialled %s with its %s token: %d %s", a.name, gw.name, which, resp.StatusCode, refusal.Code))
	r.reply(fmt.Sprintf("dial %s %s -> %d %s", a.name, which, resp.StatusCode, refusal.Code))
	if strconv.Itoa(resp.StatusCode) != st.arrow[0] || refusal.Code != st.arrow[1] {
		return fmt.Errorf("dial %s with its %s token: want %s, got %d %s", a.name, which, strings.Join(st.arrow, " "),
			resp.StatusCode, reply)
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
		req := loadgen.JobRequest{Service: scService, Params: map[string]string{"seed": job}, Input: []byte("input of " + job)}
		var d api.JobDetail
		status, d, err = b.CreateJob(r.ctx, req)
		if err == nil {
			r.mu.Lock()
			r.jobs[job] = d.ID
			r.mu.Unlock()
			r.setName(d.ID, job)
		}
	case "get":
		_, err = b.Job(r.ctx, id)
	case "events":
		_, err = b.Events(r.ctx, id)
	case "cancel":
		status, _, err = b.Cancel(r.ctx, id)
	case "list":
		_, err = b.ListJobs(r.ctx, 0, "")
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
