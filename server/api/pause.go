package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/ratelimit"
	"github.com/rendermac/rendermac/server/store"
)

// The operators' routes of the API (SPEC section 6, "Operators"): the
// operator credential of the console (`rendermac admin create-operator`),
// presented as a bearer secret.
const (
	sqlOperatorByHash = `SELECT id::text, token_hash FROM operators WHERE token_hash = $1 AND revoked_at IS NULL`
	// sqlOtherSecret finds a buyer's API key or a device token with the
	// hash: a real secret of the wrong kind, refused 403 rather than 401.
	sqlOtherSecret = `SELECT EXISTS (SELECT 1 FROM api_keys WHERE key_hash = $1)
    OR EXISTS (SELECT 1 FROM devices WHERE token_hash = $1)`
)

// OperatorKind is what a presented bearer secret turned out to be.
type OperatorKind int

// Kinds of a presented secret.
const (
	// OperatorUnknown: no live operator has it, nor any buyer or device.
	OperatorUnknown OperatorKind = iota
	// OperatorLive: a live (unrevoked) operator's credential.
	OperatorLive
	// OperatorOther: a buyer's API key or a device token.
	OperatorOther
)

// IdentifyOperator looks a presented secret up by its hash: the operator
// row through the unique index on token_hash, its hash compared again in
// constant time; a miss is looked up among buyers' keys and devices' tokens
// only to tell 403 from 401.
func IdentifyOperator(ctx context.Context, q store.Querier, secret string) (OperatorKind, string, error) {
	if secret == "" || len(secret) > maxBearerLen {
		return OperatorUnknown, "", nil
	}
	hash := HashSecret(secret)
	var id, stored string
	err := q.QueryRow(ctx, sqlOperatorByHash, hash).Scan(&id, &stored)
	switch {
	case err == nil && subtle.ConstantTimeCompare([]byte(stored), []byte(hash)) == 1:
		return OperatorLive, id, nil
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return OperatorUnknown, "", fmt.Errorf("authenticate operator: %w", err)
	}
	var other bool
	if err := q.QueryRow(ctx, sqlOtherSecret, hash).Scan(&other); err != nil {
		return OperatorUnknown, "", fmt.Errorf("authenticate operator: %w", err)
	}
	if other {
		return OperatorOther, "", nil
	}
	return OperatorUnknown, "", nil
}

// operator authenticates an operator by bearer credential and calls h with
// the operator's id. A missing, unknown or revoked credential is 401 (the
// unknown ones count against the client IP's AuthFailuresPerIP, as a
// buyer's do); a buyer's API key or a device token is 403.
func (a *API) operator(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secret := bearer(r)
		if secret == "" {
			unauthorized(w, "missing bearer operator credential")
			return
		}
		ip := ratelimit.IPKey(r.RemoteAddr)
		if ok, wait := a.limits.authFailures.Check(ip); !ok {
			a.refuse(w, limitAuthFailures, "failed authentications from this address", wait)
			return
		}
		kind, id, err := IdentifyOperator(r.Context(), a.pool, secret)
		switch {
		case err != nil:
			a.internal(w, r, err)
		case kind == OperatorOther:
			writeError(w, http.StatusForbidden, CodeForbidden, "an operator credential is required")
		case kind == OperatorUnknown:
			a.limits.authFailures.Allow(ip)
			unauthorized(w, "unknown or revoked operator credential")
		default:
			h(w, r, id)
		}
	}
}

// ServiceState is the body of a pause or resume's answer: the outcome
// (paused, already_paused, resumed, not_paused) and the state it left.
type ServiceState struct {
	Code    string `json:"code"`
	Service string `json:"service"`
	Paused  bool   `json:"paused"`
}

// pauseService is POST /v1/admin/services/{name}/pause.
func (a *API) pauseService(w http.ResponseWriter, r *http.Request, operatorID string) {
	a.setPaused(w, r, operatorID, true)
}

// resumeService is POST /v1/admin/services/{name}/resume.
func (a *API) resumeService(w http.ResponseWriter, r *http.Request, operatorID string) {
	a.setPaused(w, r, operatorID, false)
}

func (a *API) setPaused(w http.ResponseWriter, r *http.Request, operatorID string, pause bool) {
	name := r.PathValue("name")
	op := a.svc.ResumeService
	if pause {
		op = a.svc.PauseService
	}
	reply, err := op(r.Context(), a.pinned(), operatorID, name)
	if err != nil {
		a.internal(w, r, err)
		return
	}
	switch reply.Code {
	case protocol.CodePaused, protocol.CodeAlreadyPaused, protocol.CodeResumed, protocol.CodeNotPaused:
		writeJSON(w, http.StatusOK, ServiceState{Code: string(reply.Code), Service: name, Paused: pause})
	case protocol.CodeNotFound:
		writeError(w, http.StatusNotFound, string(protocol.CodeNotFound), reply.Message)
	default:
		a.internal(w, r, fmt.Errorf("pause service: unexpected reply %q", reply.Code))
	}
}
