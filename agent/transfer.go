package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/protocol"
)

// Artifact URLs are signed grants: they authorize themselves, so the agent
// sends them no credentials (the device token must never reach a URL an
// offer chose), and their query strings, which carry the signature, are
// kept out of logs and fail messages.

// download fetches the job's input into dir, checking its size and SHA-256
// against the offer. An input of 0 bytes means the job has none: "" is
// returned and nothing is fetched.
func (a *Agent) download(ctx context.Context, in protocol.InputRef, dir string) (string, error) {
	if in.Bytes == 0 {
		return "", nil
	}
	if in.Bytes < 0 || !protocol.ValidTokenHash(in.SHA256) {
		return "", fmt.Errorf("offer's input has bytes %d and sha256 %q; want bytes > 0 and 64 lowercase hex", in.Bytes, in.SHA256)
	}
	u, err := a.artifactURL(in.URL)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("GET input: %w", redact(err))
	}
	resp, err := a.cfg.HTTPClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET input: %w", redact(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET input %s: %w", display(u), readAPIError(resp))
	}
	path := filepath.Join(dir, "input")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", fmt.Errorf("create input file: %w", err)
	}
	h := sha256.New()
	// One byte past the offer's size is enough to tell "too long" apart.
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, in.Bytes+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch got := hex.EncodeToString(h.Sum(nil)); {
	case err != nil:
		return "", fmt.Errorf("GET input: %w", redact(err))
	case n != in.Bytes:
		return "", fmt.Errorf("input size mismatch: got %d bytes (capped at %d), offer says %d", n, in.Bytes+1, in.Bytes)
	case got != in.SHA256:
		return "", fmt.Errorf("input sha256 mismatch: got %s, offer says %s", got, in.SHA256)
	}
	return path, nil
}

// uploadTries bounds how often uploadRetrying PUTs one output; the waits
// between tries double from uploadRetryBase (0.25+0.5+1+2+4 s: an object
// store restarting, or a gateway failing over, within about 8 s).
const (
	uploadTries     = 6
	uploadRetryBase = 250 * time.Millisecond
)

// uploadRetrying is upload, tried again while the failure is transient (no
// connection, or 502, 503, 504): a presigned PUT of the same bytes to the
// same key is idempotent, and the attempt keeps its lease meanwhile (its
// phase, uploading, is renewed by heartbeats). Without it a store outage of
// a few seconds failed a short job's every attempt upload_failed and the
// job for good (`rendermac fleet`, object-store outage).
func (a *Agent) uploadRetrying(ctx context.Context, rawURL, path string, size int64) error {
	if _, err := a.artifactURL(rawURL); err != nil {
		return err // a bad URL stays bad
	}
	wait := uploadRetryBase
	for try := 1; ; try++ {
		err := a.upload(ctx, rawURL, path, size)
		if err == nil || try == uploadTries || !transientUpload(err) || ctx.Err() != nil {
			return err
		}
		a.log.Warn("upload failed; retrying", "err", err, "try", try, "retry_in", wait)
		select {
		case <-ctx.Done():
			return err
		case <-a.cfg.Clock.After(wait):
		}
		wait *= 2
	}
}

// transientUpload says whether an upload's error may pass by itself: no
// reply at all, or a gateway or store answering it is unavailable. A
// refusal (a grant refused, a full store: 507) is final.
func transientUpload(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return !errors.Is(err, os.ErrNotExist) // the output file went missing: final
	}
	switch ae.Status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// upload PUTs the output to the offer's upload URL.
func (a *Agent) upload(ctx context.Context, rawURL, path string, size int64) error {
	u, err := a.artifactURL(rawURL)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open output: %w", err)
	}
	defer f.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u.String(), f)
	if err != nil {
		return fmt.Errorf("PUT output: %w", redact(err))
	}
	// An *os.File body has no known length; state it so the upload is not chunked.
	req.ContentLength = size
	req.GetBody = func() (io.ReadCloser, error) { return os.Open(path) }
	req.Header.Set("Content-Type", "video/mp4")
	// Create-only: an S3 grant signs this header and the bucket then
	// refuses any second PUT of the key (protocol.OutputPutCondition).
	req.Header.Set(protocol.OutputPutCondition, protocol.OutputPutCreateOnly)
	resp, err := a.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("PUT output: %w", redact(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		e := readAPIError(resp)
		if resp.StatusCode == protocol.OutputPutRefusedStatus {
			// The bucket's refusal of a second write of the key: the
			// contract's output_sealed (its body is S3's XML, not ours).
			e.Code = string(protocol.CodeOutputSealed)
		}
		return fmt.Errorf("PUT output %s: %w", display(u), e)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return nil
}

// inspectOutput checks the runner's output with the same MP4 walk the
// verifier runs, so a broken output fails here as runner_failed instead of
// costing an upload and a verification, and returns the commit's output.
func inspectOutput(path, key string) (protocol.Output, error) {
	f, err := os.Open(path)
	if err != nil {
		return protocol.Output{}, fmt.Errorf("runner output: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return protocol.Output{}, fmt.Errorf("runner output: %w", err)
	}
	if _, err := mp4.Check(f, st.Size()); err != nil {
		return protocol.Output{}, fmt.Errorf("runner output is not a valid MP4: %w", err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return protocol.Output{}, fmt.Errorf("hash runner output: %w", err)
	}
	return protocol.Output{Key: key, Bytes: st.Size(), SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// artifactURL resolves an offer's artifact URL; a relative one is taken as
// relative to the server's base URL.
func (a *Agent) artifactURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("offer carries an unparsable artifact URL")
	}
	u = a.base.ResolveReference(u)
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("artifact URL %s: scheme must be http or https", display(u))
	}
	return u, nil
}

// display is a URL without its query and fragment.
func display(u *url.URL) string {
	c := *u
	c.RawQuery, c.Fragment, c.User = "", "", nil
	return c.String()
}

// redact strips the URL (and with it the grant signature) from an HTTP
// client error, keeping what went wrong.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			return fmt.Errorf("%s %s: %w", ue.Op, display(u), ue.Err)
		}
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
