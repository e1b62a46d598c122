package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/protocol"
)

// runAttempt is an attempt's goroutine: it runs the pipeline, removes the
// attempt's files, and records the outcome as the final frame. The attempt
// stays in the table (its slot taken) until the gateway answers.
func (a *Agent) runAttempt(at *attempt) {
	defer a.jobs.Done()
	// The attempt id is a validated UUID, so it is a safe path component.
	dir := filepath.Join(a.cfg.WorkDir, at.id())
	d := a.execute(at, dir)
	// Clean up before the final frame exists, so the files are gone by the
	// time the gateway can answer it and the slot is handed out again.
	if err := os.RemoveAll(dir); err != nil {
		a.log.Warn("remove attempt files", append(at.logAttrs(), "err", err)...)
	}
	a.mu.Lock()
	a.checkDiskLocked()
	a.mu.Unlock()
	switch {
	case d == nil:
		a.log.Info("attempt stopped without a final frame", append(at.logAttrs(), "cause", context.Cause(at.ctx))...)
	case d.output != nil:
		a.log.Info("output uploaded; committing", append(at.logAttrs(), "bytes", d.output.Bytes, "sha256", d.output.SHA256)...)
	default:
		a.log.Warn("attempt failed", append(at.logAttrs(), "failure_code", d.code, "message", d.message)...)
	}
	a.finish(at, d)
}

// execute is download, run, check, upload. Each step's error maps to its
// failure code; a stopped attempt maps to the reason it was stopped.
func (a *Agent) execute(at *attempt, dir string) *decision {
	o := at.offer
	r, ok := a.cfg.Runners[o.Service]
	if !ok || !slices.Contains(a.cfg.Services, o.Service) {
		return failWith(protocol.FailRunnerFailed, fmt.Errorf("service %q is not offered by this agent", o.Service))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return step(at, protocol.FailInternalError, fmt.Errorf("create attempt dir: %w", err))
	}
	a.setPhase(at, protocol.AttemptDownloading)
	input, err := a.download(at.ctx, o.Input, dir)
	if d, stop := a.stepped(at, protocol.FailDownloadFailed, err); stop {
		return d
	}
	a.setPhase(at, protocol.AttemptRunning)
	outPath := filepath.Join(dir, "output.mp4")
	err = r.Run(at.ctx, runner.Spec{Service: o.Service, Params: o.Params, Progress: a.renderProgress(at)}, input, outPath)
	if d, stop := a.stepped(at, protocol.FailRunnerFailed, err); stop {
		return d
	}
	out, err := inspectOutput(outPath, o.Output.Key)
	if d, stop := a.stepped(at, protocol.FailRunnerFailed, err); stop {
		return d
	}
	a.setPhase(at, protocol.AttemptUploading)
	err = a.uploadRetrying(at.ctx, o.Output.UploadURL, outPath, out.Bytes)
	if err != nil && a.v.commitAfterConflict() && a.conflicted(at) {
		err = nil // (variant) the upload was fenced off; commit anyway
	}
	if d, stop := stepped(at, protocol.FailUploadFailed, err); stop {
		return d
	}
	// Stopped after the upload but before the commit: the stop wins, since a
	// cancel or shutdown means this device must not claim the job.
	if d, stop := stepped(at, "", nil); stop {
		return d
	}
	return &decision{output: &out}
}

// renderProgress is the runner's progress callback for at: it logs the
// fraction each time it passes another tenth, so an operator can follow a
// long render (the wire's progress frame carries the phase only).
func (a *Agent) renderProgress(at *attempt) func(float64) {
	logged := -1
	return func(f float64) {
		tenth := int(f * 10)
		if tenth <= logged {
			return
		}
		logged = tenth
		a.log.Info("render progress", append(at.logAttrs(), "percent", tenth*10)...)
	}
}

// stepped decides whether the pipeline stops after a step. A stopped
// attempt reports why it was stopped, whatever the step returned (a runner
// killed by a cancel fails with buyer_cancelled, not runner_failed).
func stepped(at *attempt, code protocol.FailureCode, err error) (*decision, bool) {
	if at.ctx.Err() != nil {
		return stopDecision(at), true
	}
	if err != nil {
		return failWith(code, err), true
	}
	return nil, false
}

// step is stepped for a step that always ends the pipeline.
func step(at *attempt, code protocol.FailureCode, err error) *decision {
	d, _ := stepped(at, code, err)
	return d
}

// stopDecision maps the reason an attempt was stopped to what the gateway is
// told: nothing for a lost lease, which the control plane already ended.
func stopDecision(at *attempt) *decision {
	switch cause := context.Cause(at.ctx); {
	case errors.Is(cause, errBuyerCancelled):
		return &decision{code: protocol.FailBuyerCancelled, message: "cancelled by the buyer"}
	case errors.Is(cause, errShutdown):
		return &decision{code: protocol.FailProviderOffline, message: "agent shutting down"}
	default:
		return nil
	}
}
