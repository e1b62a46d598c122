package scenarios

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/internal/openapicheck"
	"github.com/rendermac/rendermac/server/api"
)

// The buyers' HTTP API (SPEC section 6) as a client that sends exactly what
// a script writes: raw bodies (wrong JSON types, undecodable base64,
// trailing data, unknown fields), any API key, any query. Every refusal is
// held to section 6's error shape and must change nothing. The listings
// are paged from the first page to the last while jobs are inserted and a
// job's journal grows between pages (`list`).

func init() {
	for name, h := range map[string]scCommand{"http": cmdHTTP, "create-many": cmdCreateMany} {
		scCommands[name] = h
	}
}

// errorStatus is the HTTP status of each error code section 6 and the
// routes it names answer with: an error whose status is not its code's is
// not section 6's error shape.
var errorStatus = map[string]int{
	"bad_request": http.StatusBadRequest, "invalid_cursor": http.StatusBadRequest, "invalid_key": http.StatusBadRequest,
	"unauthorized": http.StatusUnauthorized, "grant_required": http.StatusUnauthorized,
	"invalid_pairing_code": http.StatusUnauthorized, "insufficient_funds": http.StatusPaymentRequired,
	"grant_expired": http.StatusForbidden, "grant_invalid": http.StatusForbidden, "not_found": http.StatusNotFound,
	"method_not_allowed": http.StatusMethodNotAllowed, "idempotency_conflict": http.StatusConflict,
	"job_terminal": http.StatusConflict, "output_sealed": http.StatusConflict, "input_sealed": http.StatusConflict,
	"body_too_large": http.StatusRequestEntityTooLarge, "validation_error": http.StatusUnprocessableEntity,
	"rate_limited": http.StatusTooManyRequests, "internal": http.StatusInternalServerError,
	"not_ready": http.StatusServiceUnavailable,
}

// apiError is an error reply checked against section 6: a JSON object of
// a code and a message (and, for a validation_error, the field), sent as
// application/json with the status its code has.
type apiError struct {
	Code, Message, Field string
}

// errorShape checks an error reply and returns it.
func errorShape(status int, header http.Header, body []byte) (apiError, error) {
	var e apiError
	if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return e, fmt.Errorf("error %d is sent as %q, not application/json: %.200s", status, ct, body)
	}
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		return e, fmt.Errorf("error %d is not a JSON object: %.200s", status, body)
	}
	for k, v := range raw {
		s, ok := v.(string)
		switch {
		case !ok:
			return e, fmt.Errorf("error %d: %s is not a string: %.200s", status, k, body)
		case k == "code":
			e.Code = s
		case k == "message":
			e.Message = s
		case k == "field":
			e.Field = s
		default:
			return e, fmt.Errorf("error %d has a member %q besides code, message and field: %.200s", status, k, body)
		}
	}
	switch want, known := errorStatus[e.Code]; {
	case e.Code == "" || e.Message == "":
		return e, fmt.Errorf("error %d lacks its code or its message: %.200s", status, body)
	case !known:
		return e, fmt.Errorf("error %d has code %q, which section 6 does not name", status, e.Code)
	case want != status:
		return e, fmt.Errorf("error %s is sent with HTTP %d, not %d", e.Code, status, want)
	}
	return e, nil
}

// apiReply is one HTTP exchange with the API.
type apiReply struct {
	status int
	header http.Header
	body   []byte
}

// apiDo sends one request to the API of gateway gw with the API key key
// ("" sends none) and reads the reply (its first MiB).
func (r *scRun) apiDo(base, method, path, key string, header http.Header, body []byte) (apiReply, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(r.ctx, method, base+path, rd)
	if err != nil {
		return apiReply{}, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.httpc.Do(req)
	if err != nil {
		return apiReply{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return apiReply{}, err
	}
	return apiReply{status: resp.StatusCode, header: resp.Header, body: data}, checkOpenAPI(req, body, resp, data)
}

// scOpenAPI checks the exchanges of the scripts' API steps against the
// API's OpenAPI document (SPEC section 6, [R:api.openapi-document]).
var scOpenAPI = sync.OnceValues(func() (*openapicheck.Checker, error) {
	return openapicheck.New(api.OpenAPIDocument(), openapicheck.ControlPlane)
})

// checkOpenAPI fails an exchange that disagrees with the OpenAPI document:
// a response it does not describe, or a request it refuses that the server
// accepted (openapicheck).
func checkOpenAPI(req *http.Request, body []byte, resp *http.Response, data []byte) error {
	oa, err := scOpenAPI()
	if err != nil {
		return err
	}
	c := oa.Session()
	c.Check(req, body, resp, data)
	if f := c.Failures(); len(f) > 0 {
		return fmt.Errorf("the exchange disagrees with the OpenAPI document (server/api/openapi.json): %s", strings.Join(f, "; "))
	}
	return nil
}

// placeholders in a script's paths and bodies: {JOB} is the job's id,
// {in:NAME} the input_id of `input NAME`, {sha:TEXT} the lowercase hex
// SHA-256 of TEXT, {uuid} a fresh random id.
var placeholder = regexp.MustCompile(`\{([a-z]+:)?[A-Za-z0-9_.#-]+\}`)

// expand replaces the placeholders of text.
func (r *scRun) expand(text string) (string, error) {
	var bad error
	out := placeholder.ReplaceAllStringFunc(text, func(m string) string {
		inner := m[1 : len(m)-1]
		kind, name, ok := strings.Cut(inner, ":")
		switch {
		case inner == "uuid":
			return newUUID()
		case !ok:
			id, err := r.jobID(inner)
			if err != nil {
				bad = err
			}
			return id
		case kind == "in":
			id, found := r.surfaceState().inputs[name]
			if !found {
				bad = fmt.Errorf("no input %q (declare it with `input %s`)", name, name)
			}
			return id
		case kind == "sha":
			sum := sha256.Sum256([]byte(name))
			return hex.EncodeToString(sum[:])
		}
		bad = fmt.Errorf("unknown placeholder %s", m)
		return m
	})
	return out, bad
}

// apiKeyFor returns the API key a step's key= names: buyer (the scenario
// buyer's), other (another buyer's), unknown (one no buyer has), none ("").
func (r *scRun) apiKeyFor(which string) (string, error) {
	switch which {
	case "", "buyer":
		return r.apiKey, nil
	case "other":
		return r.intruderKey("other")
	case "unknown":
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		return "rmk_" + hex.EncodeToString(b), nil
	case "none":
		return "", nil
	}
	return "", fmt.Errorf("key=%s: want buyer, other, unknown or none", which)
}

// cmdHTTP sends one request to the API and checks the reply: its status
// and, for a refusal, its code and field. body= is the JSON body with ' for
// " (a script's " quotes words); trailing=yes appends a second object to
// it; idem= is the Idempotency-Key (long: 201 bytes); key= is buyer
// (default), other, unknown or none; paths and bodies take placeholders
// (expand). Every answer of 400 or more must be section 6's error (JSON
// code and message, the status its code has, errorShape), and a refused
// request must change nothing: jobs, attempts, money and journal are
// compared before and after.
// Example: http POST /v1/jobs body={'service':5,'max_attempts':'3'} -> 422 validation_error field=service
// Example: http GET /v1/jobs?limit=0 -> 422 validation_error field=limit
// Example: http POST /v1/jobs body={'service':'x'} -> 422 validation_error field=service "message~known services:"
// Example: http GET /v1/jobs/{j1} -> 200 "body~exited 1" "!body~X-Amz-Signature"
func cmdHTTP(r *scRun, st scStep) error {
	// The path is the second word as written: a query's = is no option.
	method, rawPath := arg(st, 0), ""
	if len(st.words) > 1 {
		rawPath = st.words[1]
	}
	if method == "" || !strings.HasPrefix(rawPath, "/") || len(st.arrow) == 0 {
		return errors.New("want: http METHOD PATH [body=JSON] [trailing=yes] [idem=KEY|long] [key=WHO] -> STATUS [CODE] [field=F] [message~TEXT] [body~TEXT] [!body~TEXT]")
	}
	want, err := strconv.Atoi(st.arrow[0])
	if err != nil {
		return fmt.Errorf("http: status %q: %w", st.arrow[0], err)
	}
	path, err := r.expand(rawPath)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	var body []byte
	if b, ok := st.kv["body"]; ok {
		text, err := r.expand(strings.ReplaceAll(b, "'", `"`))
		if err != nil {
			return fmt.Errorf("http: %w", err)
		}
		body = []byte(text)
		if st.opt("trailing", "") == "yes" {
			body = append(body, "{}"...)
		}
	}
	header := http.Header{}
	switch idem := st.opt("idem", ""); idem {
	case "":
	case "long":
		header.Set("Idempotency-Key", strings.Repeat("k", 201))
	default:
		header.Set("Idempotency-Key", idem)
	}
	key, err := r.apiKeyFor(st.opt("key", "buyer"))
	if err != nil {
		return err
	}
	rep, e, before, err := r.apiCall(st, method, path, key, header, body)
	if err != nil {
		return fmt.Errorf("http %s %s: %w", method, rawPath, err)
	}
	got := strconv.Itoa(rep.status)
	if rep.status >= http.StatusBadRequest {
		got += " " + e.Code
		if e.Field != "" {
			got += " field=" + e.Field
		}
		r.count("http.refused", 1)
	}
	r.tl.add(laneGateway, fmt.Sprintf("buyer -> %s %s: %s", method, rawPath, got))
	r.reply(fmt.Sprintf("%s %s -> %s", method, rawPath, got))
	if rep.status != want {
		return fmt.Errorf("http %s %s: want %s, got HTTP %d: %.300s", method, rawPath, strings.Join(st.arrow, " "), rep.status, rep.body)
	}
	for _, w := range st.arrow[1:] {
		if f, ok := strings.CutPrefix(w, "field="); ok {
			if e.Field != f {
				return fmt.Errorf("http %s %s: want field %s, got %q (%s)", method, rawPath, f, e.Field, e.Message)
			}
		} else if m, ok := strings.CutPrefix(w, "body~"); ok {
			if !strings.Contains(string(rep.body), m) {
				return fmt.Errorf("http %s %s: want a body holding %q, got %.600s", method, rawPath, m, rep.body)
			}
		} else if m, ok := strings.CutPrefix(w, "!body~"); ok {
			if strings.Contains(string(rep.body), m) {
				return fmt.Errorf("http %s %s: want a body without %q, got %.600s", method, rawPath, m, rep.body)
			}
		} else if m, ok := strings.CutPrefix(w, "message~"); ok {
			if !strings.Contains(e.Message, m) {
				return fmt.Errorf("http %s %s: want a message holding %q, got %q", method, rawPath, m, e.Message)
			}
		} else if e.Code != w {
			return fmt.Errorf("http %s %s: want code %s, got %q (%s)", method, rawPath, w, e.Code, e.Message)
		}
	}
	if rep.status < http.StatusBadRequest {
		return nil
	}
	return r.unchangedSince(before, fmt.Sprintf("http %s %s answered %d", method, rawPath, rep.status))
}

// apiCall sends one request through the step's gateway (via=, default
// gw1) and returns the reply, the error it carries (held to section 6's
// shape by errorShape; zero for a success) and the rows as they were
// before it, for unchangedSince.
func (r *scRun) apiCall(st scStep, method, path, key string, header http.Header, body []byte) (apiReply, apiError, string, error) {
	gw, err := r.stack(st.opt("via", "gw1"))
	if err != nil {
		return apiReply{}, apiError{}, "", err
	}
	before, err := r.rowsPrint()
	if err != nil {
		return apiReply{}, apiError{}, "", err
	}
	rep, err := r.apiDo(gw.baseURL(), method, path, key, header, body)
	if err != nil || rep.status < http.StatusBadRequest {
		return rep, apiError{}, before, err
	}
	e, err := errorShape(rep.status, rep.header, rep.body)
	return rep, e, before, err
}

// unchangedSince fails, saying what happened, when the rows a refused
// request must not touch differ from before (rowsPrint).
func (r *scRun) unchangedSince(before, what string) error {
	after, err := r.rowsPrint()
	if err != nil {
		return err
	}
	if after != before {
		return fmt.Errorf("%s, yet the rows changed:\nbefore %s\nafter  %s", what, before, after)
	}
	return nil
}

// cmdCreateMany has the buyer create N jobs without an input through the
// API, named PREFIX1..PREFIXN, one after another at the pinned instant.
// Example: create-many p 60
func cmdCreateMany(r *scRun, st scStep) error {
	prefix := arg(st, 0)
	n, err := strconv.Atoi(arg(st, 1))
	if prefix == "" || err != nil || n < 1 {
		return errors.New("want: create-many PREFIX N")
	}
	gw, err := r.stack(st.opt("via", "gw1"))
	if err != nil {
		return err
	}
	if err := r.createJobs(gw.baseURL(), prefix, 1, n); err != nil {
		return err
	}
	r.tl.add(laneGateway, fmt.Sprintf("buyer -> POST /v1/jobs x%d (%s1..%s%d): 201 each", n, prefix, prefix, n))
	return nil
}

// createJobs creates jobs PREFIXfrom..PREFIX(from+n-1), without inputs.
func (r *scRun) createJobs(base, prefix string, from, n int) error {
	b := r.buyer(base, r.apiKey)
	for i := from; i < from+n; i++ {
		name := prefix + strconv.Itoa(i)
		if _, taken := r.jobs[name]; taken {
			return fmt.Errorf("create %s: the name is taken", name)
		}
		created, err := b.Create(r.ctx, client.CreateRequest{Service: scService, Params: map[string]string{"seed": name},
			NoIdempotencyKey: true})
		if err != nil || created.Status != http.StatusCreated {
			return fmt.Errorf("create %s: HTTP %d: %v", name, created.Status, err)
		}
		d := created.Job
		r.mu.Lock()
		r.jobs[name] = d.ID
		r.mu.Unlock()
		r.setName(d.ID, name)
	}
	return nil
}

// jobIDs returns the ids of the scenario buyer's jobs in the database now.
func (r *scRun) jobIDs(ctx context.Context) (map[string]bool, error) {
	rows, err := r.observer.Query(ctx, `SELECT id::text FROM jobs WHERE buyer_id = $1`, scBuyerID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids[id] = true
	}
	return ids, rows.Err()
}

// sortedNames renders ids by their script names, for messages.
func (r *scRun) sortedNames(ids []string) string {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = r.name(id)
	}
	slices.Sort(names)
	if len(names) > 12 {
		names = append(names[:12], fmt.Sprintf("... %d more", len(names)-12))
	}
	return strings.Join(names, ",")
}

// newUUID is a random (version 4) uuid in canonical form.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
