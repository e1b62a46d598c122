package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rendermac/rendermac/internal/mp4"
)

// VerifyError reasons: why an upload failed verification.
const (
	// ReasonInvalidKey: the committed key is not a valid key, so no object can be there.
	ReasonInvalidKey = "invalid_key"
	// ReasonMissing: no object exists at the key.
	ReasonMissing = "missing"
	// ReasonSizeMismatch: the object's size differs from the committed bytes.
	ReasonSizeMismatch = "size_mismatch"
	// ReasonSHA256Mismatch: the content's SHA-256 differs from the committed one,
	// or the committed one is not 64 lowercase hex characters.
	ReasonSHA256Mismatch = "sha256_mismatch"
	// ReasonMediaInvalid: the content fails the service's media check.
	ReasonMediaInvalid = "media_invalid"
)

// Media checks Verify can run, named by the service's output media.
const (
	// MediaNone skips the media check.
	MediaNone = ""
	// MediaMP4 runs mp4.Check.
	MediaMP4 = "mp4"
)

// ErrUnknownMedia reports a media check Verify does not know. It is a server
// configuration error, not a verdict on the upload, so it is not a *VerifyError.
var ErrUnknownMedia = errors.New("artifact: unknown media check")

// VerifyError is a verdict: the upload at Key does not match the commit. Retrying
// cannot change it, so the caller fails the attempt and the job with
// verification_failed.
type VerifyError struct {
	// Key is the verified key.
	Key string
	// Reason is one of the Reason constants.
	Reason string
	// Message explains the mismatch for logs and the job's failure message.
	Message string
	// Err is the underlying cause where there is one (ErrNotFound,
	// ErrInvalidKey, an mp4 error), for errors.Is.
	Err error
}

// Error renders e.g. `artifact: verify "outputs/j/a.mp4": size_mismatch: ...`.
func (e *VerifyError) Error() string {
	return fmt.Sprintf("artifact: verify %q: %s: %s", e.Key, e.Reason, e.Message)
}

// Unwrap returns the underlying cause, if any.
func (e *VerifyError) Unwrap() error { return e.Err }

// Verify checks the object at key against a commit's claim: it exists, has
// wantBytes bytes, its SHA-256 is wantSHA256 (lowercase hex), and it passes the
// media check (MediaMP4 or MediaNone). Checks run cheapest first and stop at the
// first failure. It returns nil, a *VerifyError, or another error: a store or
// context failure, or ErrUnknownMedia, after which the upload is still
// unjudged and verification must be retried rather than the job failed.
func Verify(ctx context.Context, store Store, key string, wantBytes int64, wantSHA256, media string) error {
	return VerifyProbed(ctx, store, key, wantBytes, wantSHA256, media, nil)
}

// Probe is a last check of an object that passed every other: it gets a
// private local copy of the bytes (path, removed after) and returns nil, a
// *VerifyError-worthy verdict wrapped in ErrProbeVerdict, or another error
// (the check could not run: verification is retried, not failed).
type Probe func(ctx context.Context, path string) error

// ErrProbeVerdict marks a Probe's error as a verdict on the object.
var ErrProbeVerdict = errors.New("probe verdict")

// ReasonProbe: the content fails the service's ffprobe profile.
const ReasonProbe = "profile_mismatch"

// VerifyProbed is Verify followed, when probe is not nil, by probe on a
// local copy of the very bytes that were hashed.
func VerifyProbed(ctx context.Context, store Store, key string, wantBytes int64, wantSHA256, media string, probe Probe) error {
	if media != MediaNone && media != MediaMP4 {
		return fmt.Errorf("%w %q", ErrUnknownMedia, media)
	}
	if err := ValidateKey(key); err != nil {
		return &VerifyError{Key: key, Reason: ReasonInvalidKey, Message: err.Error(), Err: err}
	}
	if sealer, ok := store.(Sealer); ok {
		return verifySealing(ctx, sealer, key, wantBytes, wantSHA256, media, probe)
	}
	return verifyObject(ctx, store, key, key, wantBytes, wantSHA256, media, probe)
}

// verifySealing is Verify on a store whose output keys agents write
// directly (see Sealer). It judges, and seals, a private snapshot: the
// snapshot is a server-side copy of the key as it is at one instant, which
// no grant names and nothing else writes, so the bytes hashed are the bytes
// copied to the sealed key, whatever is PUT at the attempt's key meanwhile.
// Once sealed, later verifications (the sweeper's after a lost decision)
// judge the sealed copy, so a PUT after the first seal changes nothing.
func verifySealing(ctx context.Context, st Sealer, key string, wantBytes int64, wantSHA256, media string, probe Probe) error {
	sealed := SealedKey(key)
	_, err := st.Stat(ctx, sealed)
	if err == nil {
		return verifyObject(ctx, st, key, sealed, wantBytes, wantSHA256, media, probe)
	}
	if !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("artifact: verify %q: %w", key, err)
	}
	snap := snapshotKey(key)
	_, err = st.Copy(ctx, key, snap)
	if errors.Is(err, ErrNotFound) {
		return &VerifyError{Key: key, Reason: ReasonMissing, Message: "no object at the key", Err: err}
	}
	if err != nil {
		return fmt.Errorf("artifact: verify %q: snapshot: %w", key, err)
	}
	defer func() { _ = st.Delete(context.WithoutCancel(ctx), snap) }() // private; a leftover is garbage, not an object
	if err := verifyObject(ctx, st, key, snap, wantBytes, wantSHA256, media, probe); err != nil {
		return err
	}
	if _, err := st.Copy(ctx, snap, sealed); err != nil {
		return fmt.Errorf("artifact: verify %q: seal: %w", key, err)
	}
	return nil
}

// verifyObject judges the object at readKey (key itself, or a private copy
// of it) against the claim on key.
func verifyObject(ctx context.Context, store Store, key, readKey string, wantBytes int64, wantSHA256, media string, probe Probe) (err error) {
	r, obj, err := store.Open(ctx, readKey)
	if errors.Is(err, ErrNotFound) {
		return &VerifyError{Key: key, Reason: ReasonMissing, Message: "no object at the key", Err: err}
	}
	if err != nil {
		return fmt.Errorf("artifact: verify %q: %w", key, err)
	}
	defer func() { _ = r.Close() }() // read-only; a close error changes no verdict

	if obj.Bytes != wantBytes {
		return &VerifyError{Key: key, Reason: ReasonSizeMismatch,
			Message: fmt.Sprintf("object has %d bytes, commit claims %d", obj.Bytes, wantBytes)}
	}
	if !isLowerHexSHA256(wantSHA256) {
		return &VerifyError{Key: key, Reason: ReasonSHA256Mismatch,
			Message: fmt.Sprintf("claimed sha256 %.80q is not 64 lowercase hex characters", wantSHA256)}
	}
	// Hash one sequential read (one GET on S3, not a ranged GET per buffer)
	// of exactly the stat'd bytes.
	h := sha256.New()
	var sink io.Writer = h
	var local *os.File
	if probe != nil {
		if local, err = os.CreateTemp("", "rendermac-verify-*.mp4"); err != nil {
			return fmt.Errorf("artifact: verify %q: local copy: %w", key, err)
		}
		defer func() { _ = local.Close(); _ = os.Remove(local.Name()) }()
		sink = io.MultiWriter(h, local)
	}
	n, err := copyPooled(sink, ctxReader{ctx: ctx, r: io.LimitReader(r, obj.Bytes)})
	if err == nil && n != obj.Bytes {
		err = fmt.Errorf("read %d of %d bytes", n, obj.Bytes)
	}
	if err != nil {
		return fmt.Errorf("artifact: verify %q: hash: %w", key, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != wantSHA256 {
		return &VerifyError{Key: key, Reason: ReasonSHA256Mismatch,
			Message: fmt.Sprintf("object sha256 %s, commit claims %s", got, wantSHA256)}
	}
	if media == MediaMP4 {
		_, err := mp4.Check(ctxReaderAt{ctx: ctx, r: r}, obj.Bytes)
		if errors.Is(err, mp4.ErrInvalid) {
			return &VerifyError{Key: key, Reason: ReasonMediaInvalid, Message: err.Error(), Err: err}
		}
		if err != nil {
			return fmt.Errorf("artifact: verify %q: media check: %w", key, err)
		}
	}
	if probe != nil {
		err := probe(ctx, local.Name())
		if errors.Is(err, ErrProbeVerdict) {
			return &VerifyError{Key: key, Reason: ReasonProbe, Message: strings.TrimPrefix(err.Error(), ErrProbeVerdict.Error()+": "), Err: err}
		}
		if err != nil {
			return fmt.Errorf("artifact: verify %q: probe: %w", key, err)
		}
	}
	return nil
}

func isLowerHexSHA256(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ctxReaderAt makes mp4.Check stop once ctx ends; the error it returns is not
// mp4.ErrInvalid, so a cancelled verification is never mistaken for bad media.
type ctxReaderAt struct {
	ctx context.Context
	r   io.ReaderAt
}

func (c ctxReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.ReadAt(p, off)
}
