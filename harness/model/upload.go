package model

import (
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// Upload is a PUT of other bytes to the attempt's output key: upload_ok
// while the attempt is in a lease phase (the agent is still producing its
// output; nothing the model tracks changes), output_sealed once a commit
// claimed it or it ended, and for an output key of no attempt of the job.
// The output is write-once from its claim (docs/semantics.md, artifact
// uploads), so what verification read is what is served.
func (m *ExecutionModel) Upload(_ time.Time, jobID, attemptID string) protocol.Reply {
	a := m.attempts[attemptID]
	if a == nil || a.row.JobID != jobID || !a.row.Status.LeasePhase() {
		return protocol.Reply{Code: protocol.CodeOutputSealed}
	}
	return protocol.Reply{Code: protocol.CodeUploadOK}
}
