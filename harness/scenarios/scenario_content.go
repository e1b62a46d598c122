package scenarios

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/rendermac/rendermac/protocol"
)

// Verification by content: outputs whose claimed size and digest are
// honest but whose media is broken, and what a buyer is served once the
// job has ended. The broken files are derived here from the valid
// synthetic file a plain `upload` sends, one defect each, so that the only
// thing wrong with them is the one the scenario names.

func init() {
	scCommands["served"] = cmdServed
}

// mp4Break is one way `upload` breaks the valid synthetic file.
type mp4Break struct {
	what  string
	apply func([]byte) ([]byte, error)
}

// mp4Breaks are the upload words naming a broken output.
var mp4Breaks = map[string]mp4Break{
	"nomoov":    {"MP4 with its moov box cut out", cutMoov},
	"notrack":   {"MP4 whose moov holds no trak", dropTraks},
	"truncated": {"MP4 whose mdat declares more bytes than the file holds", overlongMdat},
}

// breakOutput applies the break the upload's words name, if any.
func breakOutput(words []string, data []byte) (out []byte, what string, err error) {
	for _, w := range words {
		if b, ok := mp4Breaks[w]; ok {
			out, err = b.apply(data)
			return out, b.what, err
		}
	}
	return data, "", nil
}

// scBox is a box's span in its parent: [off, off+size).
type scBox struct {
	typ       string
	off, size int
}

// boxesIn lists the boxes tiling data[start:end], which must use 32-bit
// sizes (the synthetic file does).
func boxesIn(data []byte, start, end int) ([]scBox, error) {
	var out []scBox
	for off := start; off < end; {
		if end-off < 8 {
			return nil, fmt.Errorf("box at %d: %d bytes left", off, end-off)
		}
		size := int(binary.BigEndian.Uint32(data[off:]))
		if size < 8 || size > end-off {
			return nil, fmt.Errorf("box at %d: size %d does not fit [%d, %d)", off, size, off, end)
		}
		out = append(out, scBox{typ: string(data[off+4 : off+8]), off: off, size: size})
		off += size
	}
	return out, nil
}

// topBox finds the one top-level box of type typ.
func topBox(data []byte, typ string) (scBox, error) {
	boxes, err := boxesIn(data, 0, len(data))
	if err != nil {
		return scBox{}, err
	}
	for _, b := range boxes {
		if b.typ == typ {
			return b, nil
		}
	}
	return scBox{}, fmt.Errorf("the synthetic file has no %s box", typ)
}

// cutMoov removes the moov box: ftyp then mdat.
func cutMoov(data []byte) ([]byte, error) {
	moov, err := topBox(data, "moov")
	if err != nil {
		return nil, err
	}
	return append(append([]byte{}, data[:moov.off]...), data[moov.off+moov.size:]...), nil
}

// dropTraks removes every trak from moov and shrinks moov by as much: a
// well-formed movie header with nothing to play.
func dropTraks(data []byte) ([]byte, error) {
	moov, err := topBox(data, "moov")
	if err != nil {
		return nil, err
	}
	children, err := boxesIn(data, moov.off+8, moov.off+moov.size)
	if err != nil {
		return nil, err
	}
	body := []byte{}
	for _, c := range children {
		if c.typ != "trak" {
			body = append(body, data[c.off:c.off+c.size]...)
		}
	}
	if len(body) == moov.size-8 {
		return nil, errors.New("the synthetic file's moov has no trak to drop")
	}
	out := append([]byte{}, data[:moov.off]...)
	out = binary.BigEndian.AppendUint32(out, uint32(8+len(body)))
	out = append(append(append(out, "moov"...), body...), data[moov.off+moov.size:]...)
	return out, nil
}

// overlongMdat keeps every byte but declares an mdat 4 KiB longer than
// what is left of the file: the upload of a render cut short.
func overlongMdat(data []byte) ([]byte, error) {
	mdat, err := topBox(data, "mdat")
	if err != nil {
		return nil, err
	}
	out := append([]byte{}, data...)
	binary.BigEndian.PutUint32(out[mdat.off:], uint32(mdat.size+4096))
	return out, nil
}

// contractRefusal is an upload answer as the contract states it: an S3
// bucket's 412 PreconditionFailed, its refusal of a second create-only PUT
// of an output key, is 409 output_sealed (SPEC section 6; the agent reads
// it the same way); any other answer is its status and JSON code.
func contractRefusal(status int, body []byte) (int, string) {
	if status == protocol.OutputPutRefusedStatus && bytes.Contains(body, []byte("<Code>PreconditionFailed</Code>")) {
		return http.StatusConflict, string(protocol.CodeOutputSealed)
	}
	return status, refusalCode(body)
}

// readAs notes, for the timeline, how contractRefusal read an answer.
func readAs(raw, status int, code string) string {
	if raw == status {
		return ""
	}
	return fmt.Sprintf(" (read as %d %s)", status, code)
}

// refusalCode is the API error code of an HTTP answer's JSON body.
func refusalCode(body []byte) string {
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &e) // no JSON body: no code
	return e.Code
}

// cmdServed checks what the job's buyer is served, through the API as the
// buyer sees it: `none`, the job offers no output (no download URL); or
// `uploaded`, the job's output downloads, through its download URL, as
// exactly the bytes the agent's accepted upload sent for the succeeded
// attempt (the bytes verification read: invariant 8 as the buyer sees it).
// Example: served j1 -> none
// Example: served j1 -> uploaded
func cmdServed(r *scRun, st scStep) error {
	id, err := r.jobID(arg(st, 0))
	if err != nil {
		return err
	}
	want := strings.Join(st.arrow, " ")
	if want != "none" && want != "uploaded" {
		return errors.New("want: served JOB -> none|uploaded")
	}
	gw, err := r.stack(st.opt("via", "gw1"))
	if err != nil {
		return err
	}
	d, err := r.buyer(gw.baseURL(), r.apiKey).Get(r.ctx, id)
	if err != nil {
		return fmt.Errorf("served: GET job %s: %w", arg(st, 0), err)
	}
	if want == "none" {
		if d.Output != nil {
			return fmt.Errorf("served: job %s (%s) offers an output: %d bytes sha256 %s", arg(st, 0), d.Status,
				d.Output.Bytes, d.Output.SHA256)
		}
		r.tl.add(laneGateway, fmt.Sprintf("buyer GET job %s: %s, no output offered", arg(st, 0), d.Status))
		r.reply("nothing served")
		return nil
	}
	if d.Output == nil {
		return fmt.Errorf("served: job %s (%s) offers no output", arg(st, 0), d.Status)
	}
	var up protocol.Output
	r.mu.Lock()
	for _, a := range d.Attempts {
		if a.Status == protocol.AttemptSucceeded {
			up = r.outputs[a.ID]
		}
	}
	r.mu.Unlock()
	if up.SHA256 == "" {
		return fmt.Errorf("served: job %s has no succeeded attempt whose upload was accepted", arg(st, 0))
	}
	got, err := r.download(d.Output.DownloadURL)
	if err != nil {
		return fmt.Errorf("served: %w", err)
	}
	r.tl.add(laneGateway, fmt.Sprintf("buyer downloaded the output of %s: %d bytes sha256 %.12s (uploaded %d bytes sha256 %.12s)",
		arg(st, 0), got.Bytes, got.SHA256, up.Bytes, up.SHA256))
	if got.Bytes != up.Bytes || got.SHA256 != up.SHA256 || d.Output.SHA256 != up.SHA256 || d.Output.Bytes != up.Bytes {
		return fmt.Errorf("served: job %s serves %d bytes sha256 %s and records %d bytes sha256 %s; the accepted upload was %d bytes sha256 %s",
			arg(st, 0), got.Bytes, got.SHA256, d.Output.Bytes, d.Output.SHA256, up.Bytes, up.SHA256)
	}
	r.reply("served = uploaded")
	return nil
}

// download GETs a signed URL and returns the size and digest of its body.
func (r *scRun) download(url string) (protocol.Output, error) {
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, url, nil)
	if err != nil {
		return protocol.Output{}, err
	}
	resp, err := r.httpc.Do(req)
	if err != nil {
		return protocol.Output{}, fmt.Errorf("download: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<24))
	if err != nil {
		return protocol.Output{}, fmt.Errorf("download: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return protocol.Output{}, fmt.Errorf("download: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	sum := sha256.Sum256(body)
	return protocol.Output{Bytes: int64(len(body)), SHA256: hex.EncodeToString(sum[:])}, nil
}
