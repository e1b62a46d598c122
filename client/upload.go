package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"

	"github.com/rendermac/rendermac/protocol/buyer"
)

// Progress is told how many of total bytes an upload or a download has
// moved so far; it is called from the goroutine doing the transfer, after
// every read. total is -1 when unknown.
type Progress func(done, total int64)

// DeclareInput is POST /v1/inputs, the first step of an upload: the
// input's size and SHA-256 (64 lowercase hex) for an input_id and its
// create-only upload grant.
func (c *Client) DeclareInput(ctx context.Context, size int64, sha256Hex string) (buyer.InputUpload, error) {
	body, err := json.Marshal(buyer.InputDeclaration{Bytes: size, SHA256: sha256Hex})
	if err != nil {
		return buyer.InputUpload{}, err
	}
	var up buyer.InputUpload
	_, err = c.do(ctx, request{method: http.MethodPost, path: "/v1/inputs", body: body, want: []int{http.StatusCreated}}, &up)
	return up, err
}

// PutInput is the second step: it streams size bytes of r to the upload
// grant with the headers the grant wants. A refusal is an *Error (Sealed
// for a second PUT). The grant is a capability: the API key is not sent.
func (c *Client) PutInput(ctx context.Context, up buyer.InputUpload, r io.Reader, size int64) error {
	target, err := c.grantURL(up.UploadURL)
	if err != nil {
		return fmt.Errorf("upload_url of %s: %w", up.InputID, err)
	}
	method := up.UploadMethod
	if method == "" {
		method = http.MethodPut
	}
	req, err := http.NewRequestWithContext(ctx, method, target, r)
	if err != nil {
		return err
	}
	req.ContentLength = size
	if size == 0 {
		req.Body = http.NoBody
	}
	for k, v := range up.UploadHeaders {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("PUT upload_url of %s: %w", up.InputID, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	if resp.StatusCode/100 != 2 {
		return refusal(method, "upload_url of "+up.InputID, resp, data)
	}
	return nil
}

// Upload does the three steps of an uploaded input but the job's creation:
// it reads r once to hash it (size bytes from its current offset),
// declares it, seeks back and streams it to the grant, hashing it again on
// the way. Bytes that changed between the two reads are an error here
// (the job's creation would refuse them). progress, when set, follows the
// second read. The returned InputID goes into CreateRequest.InputID.
func (c *Client) Upload(ctx context.Context, r io.ReadSeeker, size int64, progress Progress) (buyer.InputUpload, error) {
	start, err := r.Seek(0, io.SeekCurrent)
	if err != nil {
		return buyer.InputUpload{}, fmt.Errorf("upload: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(r, size))
	if err != nil {
		return buyer.InputUpload{}, fmt.Errorf("upload: hash the input: %w", err)
	}
	if n != size {
		return buyer.InputUpload{}, fmt.Errorf("upload: the input has %d bytes, not %d", n, size)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	up, err := c.DeclareInput(ctx, size, sum)
	if err != nil {
		return up, err
	}
	if _, err := r.Seek(start, io.SeekStart); err != nil {
		return up, fmt.Errorf("upload: %w", err)
	}
	again := sha256.New()
	body := &countingReader{r: io.TeeReader(io.LimitReader(r, size), again), total: size, progress: progress}
	if err := c.PutInput(ctx, up, body, size); err != nil {
		return up, err
	}
	if got := hex.EncodeToString(again.Sum(nil)); body.done != size || got != sum {
		return up, fmt.Errorf("upload: the input changed while it was sent (sha256 %s, then %s)", sum, got)
	}
	return up, nil
}

// UploadFile uploads the file at path (see Upload).
func (c *Client) UploadFile(ctx context.Context, path string, progress Progress) (buyer.InputUpload, error) {
	f, err := os.Open(path)
	if err != nil {
		return buyer.InputUpload{}, fmt.Errorf("upload: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return buyer.InputUpload{}, fmt.Errorf("upload: %w", err)
	}
	if !st.Mode().IsRegular() {
		return buyer.InputUpload{}, fmt.Errorf("upload: %s is not a regular file", path)
	}
	return c.Upload(ctx, f, st.Size(), progress)
}

// countingReader reports the bytes read through it.
type countingReader struct {
	r           io.Reader
	done, total int64
	progress    Progress
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.done += int64(n)
	if c.progress != nil && n > 0 {
		c.progress(c.done, c.total)
	}
	return n, err
}

// hashingWriter hashes what is written through it.
type hashingWriter struct {
	w    io.Writer
	h    hash.Hash
	done int64
}

func (w *hashingWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.h.Write(p[:n])
	w.done += int64(n)
	return n, err
}
