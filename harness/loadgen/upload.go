package loadgen

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"

	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/protocol"
)

// UploadSynthetic PUTs a small valid MP4 (seeded by the attempt) to the
// offer's grant URL and returns the output to commit.
func UploadSynthetic(ctx context.Context, httpc *http.Client, o *protocol.LeaseOffer) (protocol.Output, error) {
	data := mp4.Synthetic(mp4.SyntheticParams{Seed: o.AttemptID, MdatBytes: 2048})
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, o.Output.UploadURL, bytes.NewReader(data))
	if err != nil {
		return protocol.Output{}, err
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return protocol.Output{}, fmt.Errorf("upload: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return protocol.Output{}, fmt.Errorf("upload: HTTP %d: %s", resp.StatusCode, body)
	}
	sum := sha256.Sum256(data)
	return protocol.Output{Key: o.Output.Key, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}, nil
}
