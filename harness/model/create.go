package model

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// Request limits of docs/semantics.md, CreateJob step 1.
const (
	paramsMax         = 32
	paramKeyLenMax    = 32
	paramValueLenMax  = 256
	idempotencyKeyMax = 200
)

// CreateJob admits a buyer's order: validation (first failing field wins,
// nothing written), idempotency, funds, then the job row, its held hold and
// the insert journal row. A job id is drawn from the IDSource only when the
// row is inserted.
func (m *ExecutionModel) CreateJob(now time.Time, req protocol.CreateJobRequest) protocol.Reply {
	now = normalize(now)
	b, ok := m.buyers[req.BuyerID]
	if !ok {
		return protocol.Reply{Code: protocol.CodeNotFound, Field: "buyer"}
	}
	svc, ok := m.service(req.Service)
	if !ok {
		return invalid("service")
	}
	if field := validateRequest(req, svc); field != "" {
		return invalid(field)
	}
	var fp string
	if req.IdempotencyKey != "" {
		fp = fingerprint(req)
		if prev, ok := m.idem[idemKey{b.id, req.IdempotencyKey}]; ok {
			if prev.fingerprint != fp {
				return protocol.Reply{Code: protocol.CodeIdempotencyConflict}
			}
			return protocol.Reply{Code: protocol.CodeCreated, JobID: prev.row.ID, Existing: true}
		}
	}
	if svc.PriceCents > b.balance {
		return protocol.Reply{Code: protocol.CodeInsufficientFunds}
	}
	j := m.insertJob(now, req, b, svc, fp)
	return protocol.Reply{Code: protocol.CodeCreated, JobID: j.row.ID}
}

// insertJob is CreateJob step 4.
func (m *ExecutionModel) insertJob(now time.Time, req protocol.CreateJobRequest, b *buyer, svc protocol.Service,
	fp string) *job {
	id := m.ids.NewJobID()
	if _, dup := m.jobs[id]; dup {
		// Postgres would refuse the duplicate primary key; the model has
		// no way to answer it either.
		panic(fmt.Sprintf("sim: IDSource returned job id %s twice", id))
	}
	j := &job{
		row: protocol.JobRow{ID: id, BuyerID: b.id, Service: svc.Name, Status: protocol.JobQueued,
			MaxAttempts: req.MaxAttempts, CreatedAt: now, AdmissionDeadline: normalize(now.Add(req.AdmissionWindow)),
			HoldStatus: protocol.HoldHeld, HoldCents: svc.PriceCents},
		buyer:       b,
		fingerprint: fp,
	}
	b.balance -= svc.PriceCents
	b.held += svc.PriceCents
	m.jobs[id] = j
	if req.IdempotencyKey != "" {
		m.idem[idemKey{b.id, req.IdempotencyKey}] = j
	}
	m.allJobs = insertOrdered(m.allJobs, j)
	m.open = insertOrdered(m.open, j)
	m.record(kindJob, id, "", "", string(protocol.JobQueued), "", protocol.ActorBuyer, now)
	m.touch(j)
	return j
}

func invalid(field string) protocol.Reply {
	return protocol.Reply{Code: protocol.CodeValidation, Field: field}
}

// service looks name up in the configured catalogue.
func (m *ExecutionModel) service(name string) (protocol.Service, bool) {
	for _, s := range m.cfg.Services {
		if s.Name == name {
			return s, true
		}
	}
	return protocol.Service{}, false
}

// validateRequest checks the fields after service, in the documented order,
// and returns the first offending field ("" when all are valid).
func validateRequest(req protocol.CreateJobRequest, svc protocol.Service) string {
	switch {
	case req.MaxAttempts < protocol.MaxAttemptsMin || req.MaxAttempts > protocol.MaxAttemptsMax:
		return "max_attempts"
	case req.AdmissionWindow < protocol.AdmissionWindowMin || req.AdmissionWindow > protocol.AdmissionWindowMax:
		return "admission_window"
	case req.Input.Bytes < 0:
		return "input.bytes"
	case !protocol.ValidTokenHash(req.Input.SHA256): // the same 64-lowercase-hex form
		return "input.sha256"
	case !validParams(req.Params) || !declaredParamsFit(req.Params, svc):
		return "params"
	case len(req.IdempotencyKey) > idempotencyKeyMax || !protocol.ValidText(req.IdempotencyKey):
		return "idempotency_key"
	}
	return ""
}

func validParams(params map[string]string) bool {
	if len(params) > paramsMax {
		return false
	}
	for k, v := range params {
		if !validParamKey(k) || len(v) > paramValueLenMax || !protocol.ValidText(v) {
			return false
		}
	}
	return true
}

// declaredParamsFit reports whether every param is one the service
// declares, with a value of its type within its bounds (the model's own
// reading of the contract's param types; the server uses
// protocol.ParamSpec.Accepts).
func declaredParamsFit(params map[string]string, svc protocol.Service) bool {
	declared := 0
	for _, spec := range svc.Params {
		v, set := params[spec.Name]
		if !set {
			continue
		}
		declared++
		if !paramFits(spec, v) {
			return false
		}
	}
	return declared == len(params)
}

func paramFits(spec protocol.ParamSpec, v string) bool {
	switch spec.Type {
	case protocol.ParamInteger:
		if !decimalInteger(v) {
			return false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		return err == nil && float64(n) >= spec.Min && float64(n) <= spec.Max
	case protocol.ParamNumber:
		var f float64
		if !jsonNumber(v) || json.Unmarshal([]byte(v), &f) != nil {
			return false
		}
		return f >= spec.Min && f <= spec.Max
	case protocol.ParamBoolean:
		return v == "true" || v == "false"
	case protocol.ParamString:
		limit := spec.MaxLen
		if limit == 0 {
			limit = paramValueLenMax
		}
		if len(v) > limit {
			return false
		}
		if len(spec.Enum) == 0 {
			return true
		}
		for _, e := range spec.Enum {
			if e == v {
				return true
			}
		}
	}
	return false
}

// decimalInteger matches -?(0|[1-9][0-9]*), a JSON integer literal.
func decimalInteger(v string) bool {
	d := strings.TrimPrefix(v, "-")
	if d == "" || (d[0] == '0' && len(d) > 1) {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

// jsonNumber matches a JSON number literal and nothing around it.
func jsonNumber(v string) bool {
	if v == "" || strings.TrimSpace(v) != v || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return false
	}
	var n json.Number
	return json.Unmarshal([]byte(v), &n) == nil
}

// validParamKey matches [a-z0-9_]{1,32}.
func validParamKey(k string) bool {
	if len(k) < 1 || len(k) > paramKeyLenMax {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// fingerprint is the lowercase hex SHA-256 of the request's JSON (service,
// params, input, max_attempts: the fields CreateJobRequest tags for JSON,
// map keys sorted by encoding/json) immediately followed by the admission
// window in whole milliseconds as a decimal number.
func fingerprint(req protocol.CreateJobRequest) string {
	js, err := json.Marshal(req)
	if err != nil {
		panic(fmt.Sprintf("sim: marshal request: %v", err)) // strings and ints cannot fail
	}
	h := sha256.New()
	h.Write(js)
	h.Write(strconv.AppendInt(nil, req.AdmissionWindow.Milliseconds(), 10))
	return hex.EncodeToString(h.Sum(nil))
}
