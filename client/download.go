package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/rendermac/rendermac/protocol/buyer"
)

// IntegrityError is a download whose bytes are not the job's recorded
// output: another size or another SHA-256.
type IntegrityError struct {
	JobID              string
	WantBytes, Bytes   int64
	WantSHA256, SHA256 string
}

func (e *IntegrityError) Error() string {
	if e.Bytes != e.WantBytes {
		return fmt.Sprintf("download of job %s: %d bytes, the output has %d", e.JobID, e.Bytes, e.WantBytes)
	}
	return fmt.Sprintf("download of job %s: sha256 %s, the output has %s", e.JobID, e.SHA256, e.WantSHA256)
}

// ErrNoOutput is Download of a job that has no output (it has not
// succeeded).
var ErrNoOutput = errors.New("the job has no output")

// Download writes the output of job (as Get or Wait returned it, with its
// download grant) to w and checks it: the bytes and their SHA-256 must be
// the output's recorded ones, or the error is an *IntegrityError (the
// bytes were written to w all the same: DownloadFile keeps none of them).
// A grant that expired (15 minutes by default) is a 403 *Error: Get the
// job again for a new one. progress, when set, follows the transfer.
func (c *Client) Download(ctx context.Context, job buyer.JobDetail, w io.Writer, progress Progress) (int64, error) {
	if job.Output == nil || job.Output.DownloadURL == "" {
		return 0, fmt.Errorf("download of job %s (%s): %w", job.ID, job.Status, ErrNoOutput)
	}
	out := job.Output
	target, err := c.grantURL(out.DownloadURL)
	if err != nil {
		return 0, fmt.Errorf("download_url of %s: %w", job.ID, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET download_url of %s: %w", job.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
		return 0, refusal(http.MethodGet, "download_url of "+job.ID, resp, data)
	}
	hw := &hashingWriter{w: w, h: sha256.New()}
	// One byte past the recorded size is read, so a longer body is caught
	// without reading all of it.
	body := &countingReader{r: io.LimitReader(resp.Body, out.Bytes+1), total: out.Bytes, progress: progress}
	if _, err := io.Copy(hw, body); err != nil {
		return hw.done, fmt.Errorf("download of job %s: %w", job.ID, err)
	}
	got := hex.EncodeToString(hw.h.Sum(nil))
	if hw.done != out.Bytes || got != out.SHA256 {
		return hw.done, &IntegrityError{JobID: job.ID, WantBytes: out.Bytes, Bytes: hw.done, WantSHA256: out.SHA256, SHA256: got}
	}
	return hw.done, nil
}

// DownloadFile downloads the output of job to path: into a temporary file
// beside it, renamed to path only once the bytes are checked, so path
// never holds an output that failed the check (nor half of one).
func (c *Client) DownloadFile(ctx context.Context, job buyer.JobDetail, path string, progress Progress) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".part-*")
	if err != nil {
		return 0, fmt.Errorf("download of job %s: %w", job.ID, err)
	}
	n, err := c.Download(ctx, job, tmp, progress)
	if err == nil {
		err = tmp.Chmod(0o644) // an output file, not a secret: CreateTemp's 0600 would hide it from its readers
	}
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("download of job %s: %w", job.ID, cerr)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return n, err
	}
	return n, nil
}
