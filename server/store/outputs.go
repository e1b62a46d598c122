package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
)

// OutputInvariant is the number of the invariant CheckOutputs checks.
const OutputInvariant = 8

const sqlSucceededOutputs = `
SELECT id::text, output_key, output_bytes, output_sha256 FROM jobs
WHERE status = 'succeeded' ORDER BY jobs.created_at, jobs.id`

type recordedOutput struct {
	jobID, key, sha string
	bytes           int64
}

// CheckOutputs is invariant 8's storage half: it re-reads every succeeded
// job's output object from st, hashing every byte, and reports each whose
// size or SHA-256 differs from what the job recorded, or that is missing.
// CheckInvariants checks the rows agree with each other; this checks the
// bytes served agree with the rows (an upload after the claim, a store
// that lost or changed an object). The error is only for trouble running
// the check (a store that cannot be read is an error, not a violation).
func CheckOutputs(ctx context.Context, q Querier, st artifact.Store) ([]protocol.Violation, error) {
	var outs []recordedOutput
	if err := readAll(ctx, q, []read{outputsRead(&outs)}); err != nil {
		return nil, err
	}
	return verifyOutputs(ctx, st, outs)
}

// outputsRead lists every succeeded job's recorded output into outs.
func outputsRead(outs *[]recordedOutput) read {
	return read{what: "check invariant 8 (stored outputs)", sql: sqlSucceededOutputs,
		row: into(outs, func(r pgx.Row) (recordedOutput, error) {
			var o recordedOutput
			return o, r.Scan(&o.jobID, &o.key, &o.bytes, &o.sha)
		})}
}

// verifyOutputs re-reads and hashes each recorded output from st.
func verifyOutputs(ctx context.Context, st artifact.Store, outs []recordedOutput) ([]protocol.Violation, error) {
	var vs []protocol.Violation
	for _, o := range outs {
		// The served key: on a sealing store (S3) the verified copy, not
		// the attempt's key its agent can still write.
		n, sum, err := hashObject(ctx, st, artifact.ServedKey(st, o.key))
		switch {
		case errors.Is(err, artifact.ErrNotFound):
			vs = append(vs, protocol.Violation{Invariant: OutputInvariant,
				Message: fmt.Sprintf("succeeded job %s: no stored object at its output %s", o.jobID, o.key)})
		case err != nil:
			return vs, fmt.Errorf("check invariant 8: read %s: %w", o.key, err)
		case n != o.bytes || sum != o.sha:
			vs = append(vs, protocol.Violation{Invariant: OutputInvariant,
				Message: fmt.Sprintf("succeeded job %s: stored output %s is %d bytes sha256 %s, recorded %d bytes sha256 %s",
					o.jobID, o.key, n, sum, o.bytes, o.sha)})
		}
	}
	return vs, nil
}

func hashObject(ctx context.Context, st artifact.Store, key string) (int64, string, error) {
	rd, _, err := st.Open(ctx, key)
	if err != nil {
		return 0, "", err
	}
	defer rd.Close()
	h := sha256.New()
	n, err := io.Copy(h, rd)
	if err != nil {
		return n, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}
