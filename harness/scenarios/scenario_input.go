package scenarios

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/artifact"
)

// Uploaded inputs as a buyer makes them (POST /v1/inputs, a PUT to the
// create-only grant, then `create JOB input=NAME`), so a scenario can show
// that a job is made only from an upload that is exactly what was declared.

func init() {
	scCommands["input"] = cmdInput
	scCommands["declare"] = cmdDeclare
}

// cmdInput declares an input named NAME whose bytes are "input of NAME",
// PUTs them to its grant, and PUTs other bytes a second time, which the
// grant must refuse (input_sealed, or the bucket's 412). Options make the
// declaration lie: sha=wrong declares another SHA-256, size=wrong one byte
// more; put=no uploads nothing.
// Example: input u1 sha=wrong
func cmdInput(r *scRun, st scStep) error {
	name := arg(st, 0)
	if name == "" {
		return errors.New("want: input NAME [sha=wrong] [size=wrong] [put=no] [via=GW]")
	}
	gw, err := r.stack(st.opt("via", "gw1"))
	if err != nil {
		return err
	}
	content := "input of " + name
	sum := sha256.Sum256([]byte(content))
	size, sha := int64(len(content)), hex.EncodeToString(sum[:])
	if st.opt("sha", "") == "wrong" {
		other := sha256.Sum256([]byte("not " + content))
		sha = hex.EncodeToString(other[:])
	}
	if st.opt("size", "") == "wrong" {
		size++
	}
	b := r.buyer(gw.baseURL(), r.apiKey)
	up, err := b.DeclareInput(r.ctx, size, sha)
	if err != nil {
		return fmt.Errorf("declare input %s: %w", name, err)
	}
	r.surfaceState().inputs[name] = up.InputID
	r.surfaceState().uploads[name] = up
	if st.opt("put", "yes") == "no" {
		r.tl.add(laneGateway, fmt.Sprintf("buyer -> POST /v1/inputs (%s): 201, nothing uploaded", name))
		return nil
	}
	if err := b.PutInput(r.ctx, up, strings.NewReader(content), int64(len(content))); err != nil {
		return fmt.Errorf("upload input %s: %w", name, err)
	}
	err = b.PutInput(r.ctx, up, strings.NewReader("late bytes"), int64(len("late bytes")))
	var se *client.Error
	if !errors.As(err, &se) || !se.Sealed() {
		return fmt.Errorf("input %s: a second PUT of its grant was not refused: %v", name, err)
	}
	r.count("input.resealed", 1)
	r.tl.add(laneGateway, fmt.Sprintf("buyer -> POST /v1/inputs (%s): 201; PUT %d bytes: 200; second PUT: %d",
		name, len(content), se.Status))
	return nil
}

// cmdDeclare sends POST /v1/inputs and checks the answer. The declaration
// is of NAME's bytes ("input of NAME") unless bytes= (a number, or over:
// one byte over the default --max-input-upload-bytes) or sha= (upper: the
// right digest in upper case; short: 63 characters; none: left out) say
// otherwise. A 201 must carry an input_id of the declared size and digest,
// both echoed, a PUT upload_url of uploads/{buyer}/{input_id} with
// If-None-Match: * as its one header, and expires_at the pinned now plus
// the default --input-upload-ttl; a refusal must be section 6's error.
// Either way nothing is written: no row, no object at the upload's key.
// Example: declare d1 bytes=0 -> 422 validation_error field=bytes
// Example: declare d2 -> 201
func cmdDeclare(r *scRun, st scStep) error {
	name := arg(st, 0)
	if name == "" || len(st.arrow) == 0 {
		return errors.New("want: declare NAME [bytes=N|over] [sha=upper|short|none] -> 201 | STATUS CODE field=F")
	}
	content := "input of " + name
	sum := sha256.Sum256([]byte(content))
	decl := struct {
		Bytes  int64   `json:"bytes"`
		SHA256 *string `json:"sha256,omitempty"`
	}{Bytes: int64(len(content))}
	sha := hex.EncodeToString(sum[:])
	switch b := st.opt("bytes", ""); b {
	case "":
	case "over":
		decl.Bytes = api.DefaultMaxUploadBytes + 1
	default:
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil {
			return fmt.Errorf("declare: bytes=%s: %w", b, err)
		}
		decl.Bytes = n
	}
	switch s := st.opt("sha", ""); s {
	case "":
	case "upper":
		sha = strings.ToUpper(sha)
	case "short":
		sha = sha[1:]
	case "none":
	default:
		return fmt.Errorf("declare: sha=%s: want upper, short or none", s)
	}
	if st.opt("sha", "") != "none" {
		decl.SHA256 = &sha
	}
	raw, _ := json.Marshal(decl)
	rep, e, before, err := r.apiCall(st, http.MethodPost, "/v1/inputs", r.apiKey, nil, raw)
	if err != nil {
		return fmt.Errorf("declare %s: %w", name, err)
	}
	got := strconv.Itoa(rep.status)
	var up buyer.InputUpload
	if rep.status >= http.StatusBadRequest {
		got += " " + e.Code + " field=" + e.Field
		r.count("declare.refused", 1)
	} else if err := json.Unmarshal(rep.body, &up); err != nil {
		return fmt.Errorf("declare %s: HTTP %d with a body that is not an input upload: %.300s", name, rep.status, rep.body)
	}
	r.tl.add(laneGateway, fmt.Sprintf("buyer -> POST /v1/inputs %s: %s", raw, got))
	r.reply("declare " + name + " -> " + got)
	if got != strings.Join(st.arrow, " ") {
		return fmt.Errorf("declare %s: want %s, got %s: %.300s", name, strings.Join(st.arrow, " "), got, rep.body)
	}
	if rep.status == http.StatusCreated {
		if err := r.checkDeclared(up, decl.Bytes, sha); err != nil {
			return fmt.Errorf("declare %s: %w", name, err)
		}
		r.surfaceState().inputs[name] = up.InputID
		r.surfaceState().uploads[name] = up
		r.count("declare.issued", 1)
	}
	return r.unchangedSince(before, fmt.Sprintf("declare %s answered %d", name, rep.status))
}

// checkDeclared checks a 201 of POST /v1/inputs against what was declared,
// and that the upload's key holds nothing yet.
func (r *scRun) checkDeclared(up buyer.InputUpload, bytes int64, sha string) error {
	suffix := fmt.Sprintf("_%d_%s", bytes, sha)
	key := artifact.UploadKey(scBuyerID, up.InputID)
	switch {
	case !strings.HasPrefix(up.InputID, "in_") || !strings.HasSuffix(up.InputID, suffix):
		return fmt.Errorf("input_id %q does not declare %d bytes and sha256 %s", up.InputID, bytes, sha)
	case up.Bytes != bytes || up.SHA256 != sha:
		return fmt.Errorf("the reply echoes %d bytes sha256 %s, declared %d bytes sha256 %s", up.Bytes, up.SHA256, bytes, sha)
	case up.UploadMethod != http.MethodPut:
		return fmt.Errorf("upload_method %q, want PUT", up.UploadMethod)
	case len(up.UploadHeaders) != 1 || up.UploadHeaders[protocol.OutputPutCondition] != protocol.OutputPutCreateOnly:
		return fmt.Errorf("upload_headers %v, want exactly %s: %s", up.UploadHeaders, protocol.OutputPutCondition, protocol.OutputPutCreateOnly)
	case !up.ExpiresAt.Equal(r.clock.Now().Add(api.DefaultUploadTTL)):
		return fmt.Errorf("expires_at %s, want the pinned now plus %s (%s)", up.ExpiresAt, api.DefaultUploadTTL, r.clock.Now().Add(api.DefaultUploadTTL))
	case !strings.Contains(up.UploadURL, key):
		return fmt.Errorf("upload_url %s does not name the key %s", up.UploadURL, key)
	}
	if _, err := r.store.raw.Stat(r.ctx, key); !errors.Is(err, artifact.ErrNotFound) {
		return fmt.Errorf("the upload's key %s is not empty after its declaration (%v)", key, err)
	}
	return nil
}
