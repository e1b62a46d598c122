package loadgen

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
)

// InputSealedStatus is the answer of a second PUT of an uploaded input:
// 409 input_sealed from the control plane's artifact handler, 412
// Precondition Failed from a bucket (the grant's If-None-Match: *).
func InputSealedStatus(status int) bool {
	return status == http.StatusConflict || status == protocol.OutputPutRefusedStatus
}

// DeclareInput is POST /v1/inputs: the input's size and SHA-256 for an
// input_id and its create-only upload grant.
func (b *Buyer) DeclareInput(ctx context.Context, bytes int64, sha string) (api.InputUpload, error) {
	body, err := json.Marshal(map[string]any{"bytes": bytes, "sha256": sha})
	if err != nil {
		return api.InputUpload{}, err
	}
	var up api.InputUpload
	_, err = b.call(ctx, http.MethodPost, "/v1/inputs", nil, body, &up, http.StatusCreated)
	return up, err
}

// PutInput PUTs size bytes of r to an upload grant with the headers the
// grant wants, streaming them (the file is never held in memory). A
// refusal is a *StatusError (see InputSealedStatus).
func (b *Buyer) PutInput(ctx context.Context, up api.InputUpload, r io.Reader, size int64) error {
	req, err := http.NewRequestWithContext(ctx, up.UploadMethod, up.UploadURL, r)
	if err != nil {
		return err
	}
	req.ContentLength = size
	for k, v := range up.UploadHeaders {
		req.Header.Set(k, v)
	}
	resp, err := b.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("PUT input: %w", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	if resp.StatusCode != http.StatusOK {
		se := &StatusError{Method: req.Method, Path: "upload_url of " + up.InputID, Status: resp.StatusCode, Body: data}
		_ = json.Unmarshal(data, &se.API)
		return se
	}
	return nil
}

// UploadInput uploads the file at path as a job input: it hashes the file
// (streamed), declares it, and PUTs it to the grant. The returned
// input_id goes into JobRequest.InputID.
func (b *Buyer) UploadInput(ctx context.Context, path string) (api.InputUpload, error) {
	f, err := os.Open(path)
	if err != nil {
		return api.InputUpload{}, err
	}
	defer f.Close()
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return api.InputUpload{}, fmt.Errorf("hash %s: %w", path, err)
	}
	up, err := b.DeclareInput(ctx, size, hex.EncodeToString(h.Sum(nil)))
	if err != nil {
		return api.InputUpload{}, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return api.InputUpload{}, err
	}
	return up, b.PutInput(ctx, up, f, size)
}
