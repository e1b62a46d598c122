package scenarios

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/rendermac/rendermac/harness/loadgen"
)

// Uploaded inputs as a buyer makes them (POST /v1/inputs, a PUT to the
// create-only grant, then `create JOB input=NAME`), so a scenario can show
// that a job is made only from an upload that is exactly what was declared.

func init() {
	scCommands["input"] = cmdInput
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
	buyer := r.buyer(gw.baseURL(), r.apiKey)
	up, err := buyer.DeclareInput(r.ctx, size, sha)
	if err != nil {
		return fmt.Errorf("declare input %s: %w", name, err)
	}
	r.surfaceState().inputs[name] = up.InputID
	if st.opt("put", "yes") == "no" {
		r.tl.add(laneGateway, fmt.Sprintf("buyer -> POST /v1/inputs (%s): 201, nothing uploaded", name))
		return nil
	}
	if err := buyer.PutInput(r.ctx, up, strings.NewReader(content), int64(len(content))); err != nil {
		return fmt.Errorf("upload input %s: %w", name, err)
	}
	err = buyer.PutInput(r.ctx, up, strings.NewReader("late bytes"), int64(len("late bytes")))
	var se *loadgen.StatusError
	if !errors.As(err, &se) || !loadgen.InputSealedStatus(se.Status) {
		return fmt.Errorf("input %s: a second PUT of its grant was not refused: %v", name, err)
	}
	r.count("input.resealed", 1)
	r.tl.add(laneGateway, fmt.Sprintf("buyer -> POST /v1/inputs (%s): 201; PUT %d bytes: 200; second PUT: %d",
		name, len(content), se.Status))
	return nil
}
