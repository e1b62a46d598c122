package api

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/grant"
)

// An uploaded input (POST /v1/inputs, then a PUT to its upload_url, then
// POST /v1/jobs with input_id) is a job input too large for input_base64.
// Its input_id names the declared size and SHA-256 and a random part; the
// object lives at artifact.UploadKey(buyer, input_id), so an input_id
// names nothing outside its buyer's uploads. The upload grant is
// create-only (the object, once written, is never replaced), so the bytes
// a job creation hashed are the bytes every job made from it gets.
// docs/semantics.md, "Uploaded inputs", argues the choices.

// inputCreateBody is the body of POST /v1/inputs.
type inputCreateBody struct {
	Bytes  *int64  `json:"bytes"`
	SHA256 *string `json:"sha256"`
}

// inputIDPrefix starts every input_id; the rest is "{random}_{bytes}_{sha256}".
const inputIDPrefix = "in_"

// newInputID draws an input_id declaring bytes and sha.
func newInputID(bytes int64, sha string) string {
	return inputIDPrefix + rand.Text() + "_" + strconv.FormatInt(bytes, 10) + "_" + sha
}

// inputIDForm is every input_id newInputID draws: rand.Text's 26 base32
// characters, the size without leading zeros, the SHA-256 in lowercase hex.
var inputIDForm = regexp.MustCompile(`^` + inputIDPrefix + `[A-Z2-7]{26}_([1-9][0-9]{0,18})_([0-9a-f]{64})$`)

// parseInputID returns what an input_id declares; ok is false for text no
// POST /v1/inputs could have issued.
func parseInputID(id string) (bytes int64, sha string, ok bool) {
	m := inputIDForm.FindStringSubmatch(id)
	if m == nil {
		return 0, "", false
	}
	bytes, err := strconv.ParseInt(m[1], 10, 64)
	return bytes, m[2], err == nil
}

// createInput is POST /v1/inputs: 201 with an input_id and a create-only
// put grant for its bytes; 422 validation_error naming bytes or sha256,
// 413 body_too_large for bytes over MaxUploadBytes. It counts against the
// buyer's JobsPerBuyer like a job creation, and writes nothing: the
// grant is the only state.
func (a *API) createInput(w http.ResponseWriter, r *http.Request, buyerID string) {
	if ok, wait := a.limits.jobs.Allow(buyerID); !ok {
		a.refuse(w, limitJobs, "job creations by this buyer", wait)
		return
	}
	var body inputCreateBody
	if rerr := decodeJSON(w, r, jsonSlackBytes, &body); rerr != nil {
		rerr.write(w)
		return
	}
	switch {
	case body.Bytes == nil || *body.Bytes < 1:
		invalid("bytes", "bytes must be the input's size, 1..%d", a.cfg.MaxUploadBytes).write(w)
		return
	case *body.Bytes > a.cfg.MaxUploadBytes:
		writeJSON(w, http.StatusRequestEntityTooLarge, buyer.Error{Code: buyer.CodeBodyTooLarge, Field: "bytes",
			Message: fmt.Sprintf("an input of %d bytes exceeds the upload limit of %d bytes", *body.Bytes, a.cfg.MaxUploadBytes)})
		return
	case body.SHA256 == nil || !protocol.ValidTokenHash(*body.SHA256):
		invalid("sha256", "sha256 must be the input's SHA-256 as 64 lowercase hex characters").write(w)
		return
	}
	now, err := a.now(r.Context())
	if err != nil {
		a.internal(w, r, err)
		return
	}
	id := newInputID(*body.Bytes, *body.SHA256)
	url, err := a.cfg.Grants.Grant(r.Context(), grant.Put, artifact.UploadKey(buyerID, id), now, a.cfg.UploadTTL)
	if err != nil {
		a.internal(w, r, fmt.Errorf("grant an input upload: %w", err))
		return
	}
	writeJSON(w, http.StatusCreated, buyer.InputUpload{InputID: id, Bytes: *body.Bytes, SHA256: *body.SHA256,
		UploadURL: url, UploadMethod: http.MethodPut,
		UploadHeaders: map[string]string{protocol.OutputPutCondition: protocol.OutputPutCreateOnly},
		ExpiresAt:     now.Add(a.cfg.UploadTTL).UTC()})
}

// uploadedInput checks the buyer's upload named by id against what id
// declares, hashing the object as it streams, and returns the job's input
// and the upload's key. A refusal is the message of the input field's
// validation_error (refused != ""); err is a store failure.
func (a *API) uploadedInput(ctx context.Context, buyerID, id string) (in protocol.InputRef, key, refused string, err error) {
	bytes, sha, ok := parseInputID(id)
	if !ok {
		return in, "", fmt.Sprintf("input_id %q is not an input_id of POST /v1/inputs", clipText(id)), nil
	}
	key = artifact.UploadKey(buyerID, id)
	obj, err := a.store.Stat(ctx, key)
	switch {
	case errors.Is(err, artifact.ErrNotFound):
		return in, "", fmt.Sprintf("input_id has no upload of this buyer (declared %d bytes): PUT the file to its upload_url first", bytes), nil
	case err != nil:
		return in, "", "", fmt.Errorf("stat uploaded input %s: %w", key, err)
	case obj.Bytes != bytes:
		return in, "", fmt.Sprintf("input_id: the upload has %d bytes, declared %d", obj.Bytes, bytes), nil
	}
	if obj, err = artifact.Hash(ctx, a.store, key); err != nil {
		return in, "", "", fmt.Errorf("hash uploaded input: %w", err)
	}
	switch {
	case obj.Bytes != bytes: // replaced between the stat and the read: a create-only key is not
		return in, "", fmt.Sprintf("input_id: the upload has %d bytes, declared %d", obj.Bytes, bytes), nil
	case obj.SHA256 != sha:
		return in, "", fmt.Sprintf("input_id: the upload has sha256 %s, declared %s", obj.SHA256, sha), nil
	}
	return protocol.InputRef{Bytes: bytes, SHA256: sha}, key, "", nil
}

// linkInput returns the callback that makes the checked upload at key the
// job's input at inputs/{job_id}, inside the creating transaction: a hard
// link on a directory store, a server-side copy on a bucket. The upload
// stays, so an input_id may be named by any number of jobs. It may run
// more than once (a retried transaction): both replace dst whole.
func (a *API) linkInput(key string, in protocol.InputRef) func(context.Context, string) error {
	return func(ctx context.Context, jobID string) error {
		dst := artifact.InputKey(jobID)
		linker, ok := a.store.(artifact.Linker)
		if !ok {
			return fmt.Errorf("store input of job %s: the artifact store %T can neither link nor copy", jobID, a.store)
		}
		obj, err := linker.Link(ctx, key, dst)
		if err != nil {
			return fmt.Errorf("store input of job %s from %s: %w", jobID, key, err)
		}
		if obj.Bytes != in.Bytes {
			return fmt.Errorf("store input of job %s from %s: %d bytes, want %d", jobID, key, obj.Bytes, in.Bytes)
		}
		return nil
	}
}
