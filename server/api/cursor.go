package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/http"
	"time"

	"github.com/rendermac/rendermac/protocol/buyer"
)

// Cursors of GET /v1/jobs and GET /v1/jobs/{id}/events are opaque to the
// client: base64url (no padding) of a kind byte, the keyset position (a
// job's created_at and id, or a journal row's seq) and a 16-byte
// HMAC-SHA256 tag. The tag covers the kind, the position and the scope,
// which is never in the cursor itself: the buyer the cursor was issued to
// and the query it pages (the status filter, or the job). So a cursor
// cannot be forged or moved to another buyer or query, and the position is
// only ever compared inside the buyer's own rows: even a valid cursor of
// another buyer would reveal nothing, and it is refused anyway.
const (
	cursorPurpose = "api-cursor"
	cursorTagSize = 16
	kindJobs      = 'j'
	kindEvents    = 'e'
)

// jobsPosition is a keyset position in the buyer's jobs, newest first:
// the next page holds the jobs strictly after it in (created_at, id) DESC
// order. Both keys are immutable, so concurrent inserts never shift a page.
type jobsPosition struct {
	createdAt time.Time
	id        string // canonical uuid text, idLen bytes
}

// idLen is the length of a canonical uuid's text.
const idLen = 36

// errBadCursor is every cursor refusal; which check failed is not told.
var errBadCursor = errors.New("cursor was not issued by this server for this query")

// cursorTag is the MAC of a cursor's body under scope.
func (a *API) cursorTag(scope string, body []byte) []byte {
	m := hmac.New(sha256.New, a.signer.DeriveKey(cursorPurpose))
	m.Write([]byte(scope))
	m.Write([]byte{0})
	m.Write(body)
	return m.Sum(nil)[:cursorTagSize]
}

func (a *API) sealCursor(scope string, body []byte) string {
	return base64.RawURLEncoding.EncodeToString(append(body, a.cursorTag(scope, body)...))
}

// openCursor checks a cursor's encoding, kind, length and tag (in constant
// time) and returns its position bytes.
func (a *API) openCursor(scope string, kind byte, size int, s string) ([]byte, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) != 1+size+cursorTagSize || raw[0] != kind {
		return nil, errBadCursor
	}
	body, tag := raw[:1+size], raw[1+size:]
	if !hmac.Equal(tag, a.cursorTag(scope, body)) {
		return nil, errBadCursor
	}
	return body[1:], nil
}

func jobsScope(buyerID, status string) string { return "jobs\x00" + buyerID + "\x00" + status }

func eventsScope(buyerID, jobID string) string { return "events\x00" + buyerID + "\x00" + jobID }

func (a *API) jobsCursor(buyerID, status string, p jobsPosition) string {
	body := make([]byte, 1, 1+8+idLen)
	body[0] = kindJobs
	body = binary.BigEndian.AppendUint64(body, uint64(p.createdAt.UnixMicro()))
	body = append(body, p.id...)
	return a.sealCursor(jobsScope(buyerID, status), body)
}

func (a *API) parseJobsCursor(buyerID, status, s string) (jobsPosition, error) {
	pos, err := a.openCursor(jobsScope(buyerID, status), kindJobs, 8+idLen, s)
	if err != nil {
		return jobsPosition{}, err
	}
	return jobsPosition{createdAt: time.UnixMicro(int64(binary.BigEndian.Uint64(pos[:8]))).UTC(), id: string(pos[8:])}, nil
}

func (a *API) eventsCursor(buyerID, jobID string, seq int64) string {
	body := make([]byte, 1, 1+8)
	body[0] = kindEvents
	body = binary.BigEndian.AppendUint64(body, uint64(seq))
	return a.sealCursor(eventsScope(buyerID, jobID), body)
}

func (a *API) parseEventsCursor(buyerID, jobID, s string) (int64, error) {
	pos, err := a.openCursor(eventsScope(buyerID, jobID), kindEvents, 8, s)
	if err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(pos)), nil
}

// badCursor is the 400 for a refused cursor.
func badCursor() *requestError {
	return &requestError{status: http.StatusBadRequest,
		body: buyer.Error{Code: buyer.CodeInvalidCursor, Field: "cursor", Message: errBadCursor.Error()}}
}
