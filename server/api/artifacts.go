package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/grant"
)

// artifact serves GET, HEAD and PUT /v1/artifacts/{key...}. A grant is the
// only authority: no bearer credential opens an artifact, and a grant opens
// exactly the one key and operation it was signed for. The checks run in
// this order so that each refusal says what is wrong without touching
// storage: key shape (400), grant present (401), grant valid (403).
func (a *API) artifact(w http.ResponseWriter, r *http.Request) {
	var op grant.Op
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		op, r.Pattern = grant.Get, routeArtifactGet
	case http.MethodPut:
		op, r.Pattern = grant.Put, routeArtifactPut
	default:
		r.Pattern = routeArtifactOther
		w.Header().Set("Allow", "GET, HEAD, PUT")
		writeError(w, http.StatusMethodNotAllowed, buyer.CodeMethodNotAllowed, r.Method+" is not allowed on artifacts")
		return
	}
	// The decoded path, exactly as sent: "..", "//" and "%2e%2e" all reach
	// ValidateKey and are refused there.
	key := strings.TrimPrefix(r.URL.Path, grant.PathPrefix)
	if err := artifact.ValidateKey(key); err != nil {
		writeError(w, http.StatusBadRequest, buyer.CodeInvalidKey, err.Error())
		return
	}
	if !a.checkGrant(w, r, op, key) {
		return
	}
	if op == grant.Put {
		a.putArtifact(w, r, key)
		return
	}
	a.getArtifact(w, r, key)
}

// checkGrant answers the refusal and returns false unless the request
// carries a valid, unexpired grant for op on key.
func (a *API) checkGrant(w http.ResponseWriter, r *http.Request, op grant.Op, key string) bool {
	q := r.URL.Query()
	if q.Get("sig") == "" {
		writeError(w, http.StatusUnauthorized, buyer.CodeGrantRequired, "artifacts are opened only by a signed grant URL")
		return false
	}
	now, err := a.now(r.Context())
	if err != nil {
		a.internal(w, r, err)
		return false
	}
	switch err := a.signer.Check(op, key, q, now); {
	case err == nil:
		return true
	case errors.Is(err, grant.ErrExpired):
		writeError(w, http.StatusForbidden, buyer.CodeGrantExpired, "grant expired")
	default:
		// Bad signature, another key's grant, another operation's grant or a
		// malformed one: all mean "this grant does not open this".
		writeError(w, http.StatusForbidden, buyer.CodeGrantInvalid, "grant is not valid for "+string(op)+" on this key")
	}
	return false
}

func (a *API) getArtifact(w http.ResponseWriter, r *http.Request, key string) {
	// An output is served from the key that holds its verified bytes (its
	// sealed copy on an S3 store, where agents write the output key).
	rd, obj, err := a.store.Open(r.Context(), artifact.ServedKey(a.store, key))
	if errors.Is(err, artifact.ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "no artifact at this key")
		return
	}
	if err != nil {
		a.internal(w, r, err)
		return
	}
	defer rd.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Content-Type-Options", "nosniff")
	// A grant URL is a bearer capability: keep it and the bytes out of
	// shared caches.
	h.Set("Cache-Control", "private, no-store")
	// ServeContent gives Range support, which resumable downloads use.
	http.ServeContent(w, r, "", time.Time{}, io.NewSectionReader(rd, 0, obj.Bytes))
}

func (a *API) putArtifact(w http.ResponseWriter, r *http.Request, key string) {
	limit := a.cfg.MaxArtifactBytes
	if artifact.IsUploadKey(key) {
		limit = a.cfg.MaxUploadBytes
	}
	if r.ContentLength > limit {
		writeError(w, http.StatusRequestEntityTooLarge, buyer.CodeBodyTooLarge, "artifact exceeds the size limit")
		return
	}
	// Put leaves the key untouched when the reader fails, so a body cut off
	// by the limit never becomes a truncated object.
	body := http.MaxBytesReader(w, r.Body, limit)
	var obj artifact.Object
	var err error
	creator, creates := a.store.(artifact.Creator)
	if jobID, attemptID, ok := parseOutputKey(key); ok {
		obj, err = a.svc.PutOutput(r.Context(), jobID, attemptID, body)
	} else if artifact.IsUploadKey(key) && creates {
		obj, err = creator.Create(r.Context(), key, body) // write-once, like the bucket's If-None-Match: *
	} else if artifact.IsUploadKey(key) {
		err = fmt.Errorf("the artifact store %T cannot create uploads write-once", a.store)
	} else {
		obj, err = a.store.Put(r.Context(), key, body)
	}
	var tooLarge *http.MaxBytesError
	var sealed *fencing.SealedError
	switch {
	case errors.As(err, &sealed):
		writeError(w, http.StatusConflict, buyer.CodeOutputSealed, sealed.Error())
	case errors.Is(err, artifact.ErrExists):
		writeError(w, http.StatusConflict, buyer.CodeInputSealed, "an uploaded input is write-once: this input_id already has its bytes")
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, buyer.CodeBodyTooLarge, "artifact exceeds the size limit")
	case err != nil:
		a.internal(w, r, err)
	default:
		writeJSON(w, http.StatusOK, map[string]any{"key": obj.Key, "bytes": obj.Bytes, "sha256": obj.SHA256})
	}
}

// parseOutputKey splits "outputs/<job>/<attempt>.mp4".
func parseOutputKey(key string) (jobID, attemptID string, ok bool) {
	rest, ok := strings.CutPrefix(key, "outputs/")
	if !ok {
		return "", "", false
	}
	jobID, file, ok := strings.Cut(rest, "/")
	attemptID, isMP4 := strings.CutSuffix(file, ".mp4")
	if !ok || !isMP4 || protocol.OutputKey(jobID, attemptID) != key {
		return "", "", false
	}
	return jobID, attemptID, true
}
