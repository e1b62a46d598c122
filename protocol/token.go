package protocol

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
)

// CommitTokenBytes is the entropy of a commit token.
const CommitTokenBytes = 24

// NewCommitToken draws a single-use commit secret from rnd (crypto/rand.Reader
// in production; a seeded reader in the harness) and returns the plaintext,
// offered once in lease_offer, and the lowercase hex SHA-256 of the plaintext
// string, which is all the control plane stores.
func NewCommitToken(rnd io.Reader) (plaintext, hash string, err error) {
	var b [CommitTokenBytes]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return "", "", fmt.Errorf("draw commit token: %w", err)
	}
	plaintext = base64.RawURLEncoding.EncodeToString(b[:])
	return plaintext, HashCommitToken(plaintext), nil
}

// HashCommitToken is the stored form of a token: hex(sha256(plaintext)).
func HashCommitToken(plaintext string) string {
	sum := sha256.Sum256([]byte(plaintext))
	return hex.EncodeToString(sum[:])
}

// VerifyCommitToken reports whether plaintext hashes to storedHash. The
// comparison is constant-time in the hash so that timing tells an attacker
// nothing about how much of a guess was right.
// An empty plaintext never verifies: no token is the absence of a capability.
func VerifyCommitToken(plaintext, storedHash string) bool {
	if plaintext == "" {
		return false
	}
	got := HashCommitToken(plaintext)
	return subtle.ConstantTimeCompare([]byte(got), []byte(storedHash)) == 1
}

// ValidTokenHash reports whether h has the stored form: 64 lowercase hex chars.
func ValidTokenHash(h string) bool {
	if len(h) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
