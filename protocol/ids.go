package protocol

import (
	"encoding/hex"
	"fmt"
	"io"
)

// IDSource draws the identifiers and secrets an implementation mints. It is
// a parameter, never a global, so that the harness can hand the model and
// the Postgres layer sources that agree draw for draw. A job id is drawn only
// when a job row is inserted; an attempt id and a commit token only when an
// attempt row is inserted.
type IDSource interface {
	NewJobID() string
	NewAttemptID() string
	NewCommitToken() (plaintext, hash string, err error)
}

// RandomIDs is an IDSource over three byte streams (one per kind, so that the
// order in which kinds are drawn does not matter): crypto/rand.Reader in
// production, seeded readers in the harness.
type RandomIDs struct {
	Jobs, Attempts, Tokens io.Reader
}

// NewJobID draws a version-4 UUID from r.Jobs.
func (r RandomIDs) NewJobID() string { return UUIDFrom(r.Jobs) }

// NewAttemptID draws a version-4 UUID from r.Attempts.
func (r RandomIDs) NewAttemptID() string { return UUIDFrom(r.Attempts) }

// NewCommitToken draws a commit token from r.Tokens.
func (r RandomIDs) NewCommitToken() (string, string, error) { return NewCommitToken(r.Tokens) }

// UUIDFrom formats 16 bytes of rnd as a version-4 UUID. A reader that fails
// is a broken entropy source, which no caller can handle: it panics.
func UUIDFrom(rnd io.Reader) string {
	var b [16]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		panic(fmt.Sprintf("protocol: draw uuid: %v", err))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
