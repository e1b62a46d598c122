package artifact

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
)

// MaxKeyLen is the longest key ValidateKey accepts, in bytes.
const MaxKeyLen = 512

// ErrInvalidKey matches every error ValidateKey returns.
var ErrInvalidKey = errors.New("artifact: invalid key")

// ValidateKey accepts only relative slash-separated paths whose segments are
// non-empty, are not "." or "..", and use only [A-Za-z0-9._-], up to MaxKeyLen
// bytes. Such a key maps to a path under a store's root on every platform, so
// neither a crafted key nor a crafted grant can reach another object or escape
// the store. The error matches ErrInvalidKey and says which rule failed.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return keyError(key, "empty")
	case len(key) > MaxKeyLen:
		return keyError(key, fmt.Sprintf("longer than %d bytes", MaxKeyLen))
	case strings.HasPrefix(key, "/"):
		return keyError(key, "absolute path")
	case strings.ContainsRune(key, 0):
		return keyError(key, "contains NUL")
	case strings.ContainsRune(key, '\\'):
		return keyError(key, "contains a backslash")
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return keyError(key, "empty segment")
		case ".", "..":
			return keyError(key, fmt.Sprintf("segment %q is not allowed", seg))
		}
		for i := 0; i < len(seg); i++ {
			if c := seg[i]; c >= 0x80 {
				return keyError(key, fmt.Sprintf("segment %q contains non-ASCII byte 0x%02x", seg, c))
			} else if !keyByte(c) {
				return keyError(key, fmt.Sprintf("segment %q contains %q", seg, c))
			}
		}
	}
	return nil
}

// keyByte reports whether c may appear in a key segment. Bytes, not runes: any
// non-ASCII byte is refused, so multi-byte encodings never reach the filesystem.
func keyByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

func keyError(key, why string) error {
	const show = 64 // keep hostile keys from flooding logs
	if len(key) > show {
		key = key[:show] + "..."
	}
	return fmt.Errorf("%w %q: %s", ErrInvalidKey, key, why)
}

// InputKey is the key of a job's input, `inputs/{job_id}`. It is a valid key
// whenever jobID is a valid segment, as a UUID is.
func InputKey(jobID string) string { return "inputs/" + jobID }

// OutputKey is the key of one attempt's output, `outputs/{job_id}/{attempt_id}.mp4`.
// It is a valid key whenever both ids are valid segments, as UUIDs are.
func OutputKey(jobID, attemptID string) string {
	return outputsPrefix + jobID + "/" + attemptID + ".mp4"
}

const outputsPrefix = "outputs/"

// SealedKey is where a Sealer keeps the verified copy of an output key,
// `sealed/{key}`: written only by Verify after the copy passed, named by no
// grant that allows a write.
func SealedKey(key string) string { return "sealed/" + key }

// snapshotKey is a fresh private key for one verification's snapshot of key.
func snapshotKey(key string) string { return "verifying/" + key + "." + rand.Text() }

// Writable reports whether a grant may allow writing key: inputs, a
// buyer's uploaded inputs and outputs only, never a sealed copy, a
// snapshot or a staging upload.
func Writable(key string) bool {
	return ValidateKey(key) == nil &&
		(strings.HasPrefix(key, outputsPrefix) || strings.HasPrefix(key, "inputs/") || IsUploadKey(key))
}

// CreateOnly reports whether a put grant of key may only create it: an
// output (write-once from its first write on S3) and an uploaded input
// (write-once everywhere: the bytes a job was checked against stay put).
func CreateOnly(key string) bool {
	return strings.HasPrefix(key, outputsPrefix) || IsUploadKey(key)
}
