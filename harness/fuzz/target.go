package fuzz

import (
	"context"
	"time"

	"github.com/rendermac/rendermac/harness/model"
	"github.com/rendermac/rendermac/protocol"
)

// Target is one implementation of the contract that a sequence can be played
// against: the model, the Postgres service layer, or the full stack. Every
// method returns the contract's reply; the error is for infrastructure
// trouble only (a lost connection), which ends the run.
type Target interface {
	Name() string
	CreateJob(ctx context.Context, now time.Time, req protocol.CreateJobRequest) (protocol.Reply, error)
	Lease(ctx context.Context, now time.Time, deviceID string) (protocol.Reply, error)
	Progress(ctx context.Context, now time.Time, deviceID string, p protocol.Progress) (protocol.Reply, error)
	// CommitBegin is transaction 1. outputOK says whether the claimed output
	// will pass verification; a target with a real artifact store makes the
	// store agree with it.
	CommitBegin(ctx context.Context, now time.Time, deviceID string, c protocol.Commit, outputOK bool) (protocol.Reply, error)
	// CommitFinish is verification plus transaction 2.
	CommitFinish(ctx context.Context, now time.Time, jobID, attemptID string) (protocol.Reply, error)
	Fail(ctx context.Context, now time.Time, deviceID string, f protocol.Fail) (protocol.Reply, error)
	// Withdraw is the gateway taking back an offer it leased for deviceID
	// but could not deliver (never a frame).
	Withdraw(ctx context.Context, now time.Time, deviceID string, w protocol.Withdrawal) (protocol.Reply, error)
	Cancel(ctx context.Context, now time.Time, buyerID, jobID string) (protocol.Reply, error)
	// PauseService and ResumeService are an operator's (the world's
	// operator, WorldOperator): paused/already_paused, resumed/not_paused,
	// or not_found for a service the catalogue lacks.
	PauseService(ctx context.Context, now time.Time, service string) (protocol.Reply, error)
	ResumeService(ctx context.Context, now time.Time, service string) (protocol.Reply, error)
	Sweep(ctx context.Context, now time.Time) (protocol.SweepResult, error)
	// Upload PUTs other bytes than the attempt's honest output to its
	// output key: upload_ok or output_sealed. A target with a real store
	// re-uploads the honest output before a commit.
	Upload(ctx context.Context, now time.Time, jobID, attemptID string) (protocol.Reply, error)
	Snapshot(ctx context.Context) (protocol.Snapshot, error)
	// CheckInvariants returns every broken invariant of SPEC section 4 the
	// target can see, as readable lines.
	CheckInvariants(ctx context.Context) ([]string, error)
	Close() error
}

// ModelTarget adapts model.ExecutionModel to Target.
type ModelTarget struct{ M *model.ExecutionModel }

// NewModelTarget builds a model with the world's cast and the run's ids.
func NewModelTarget(seed uint64, variant model.Variant) *ModelTarget {
	m := model.New(model.Config{LeaseTTL: WorldLeaseTTL, HeartbeatWindow: WorldHeartbeatWindow, Variant: variant}, IDSource(seed))
	for _, b := range WorldBuyers {
		m.AddBuyer(b.ID, b.BalanceCents)
	}
	for _, d := range WorldDevices {
		m.AddDevice(d.ID, d.Services, d.SlotsTotal)
	}
	return &ModelTarget{M: m}
}

// Name implements Target.
func (t *ModelTarget) Name() string { return "model" }

// CreateJob implements Target.
func (t *ModelTarget) CreateJob(_ context.Context, now time.Time, req protocol.CreateJobRequest) (protocol.Reply, error) {
	return t.M.CreateJob(now, req), nil
}

// Lease implements Target.
func (t *ModelTarget) Lease(_ context.Context, now time.Time, dev string) (protocol.Reply, error) {
	return t.M.Lease(now, dev), nil
}

// Progress implements Target.
func (t *ModelTarget) Progress(_ context.Context, now time.Time, dev string, p protocol.Progress) (protocol.Reply, error) {
	return t.M.Progress(now, dev, p), nil
}

// CommitBegin implements Target.
func (t *ModelTarget) CommitBegin(_ context.Context, now time.Time, dev string, c protocol.Commit, ok bool) (protocol.Reply, error) {
	return t.M.CommitBegin(now, dev, c, ok), nil
}

// CommitFinish implements Target.
func (t *ModelTarget) CommitFinish(_ context.Context, now time.Time, job, att string) (protocol.Reply, error) {
	return t.M.CommitFinish(now, job, att), nil
}

// Upload implements Target.
func (t *ModelTarget) Upload(_ context.Context, now time.Time, job, att string) (protocol.Reply, error) {
	return t.M.Upload(now, job, att), nil
}

// Fail implements Target.
func (t *ModelTarget) Fail(_ context.Context, now time.Time, dev string, f protocol.Fail) (protocol.Reply, error) {
	return t.M.Fail(now, dev, f), nil
}

// Withdraw implements Target.
func (t *ModelTarget) Withdraw(_ context.Context, now time.Time, dev string, w protocol.Withdrawal) (protocol.Reply, error) {
	return t.M.Withdraw(now, dev, w), nil
}

// Cancel implements Target.
func (t *ModelTarget) Cancel(_ context.Context, now time.Time, buyer, job string) (protocol.Reply, error) {
	return t.M.Cancel(now, buyer, job), nil
}

// PauseService implements Target.
func (t *ModelTarget) PauseService(_ context.Context, now time.Time, service string) (protocol.Reply, error) {
	return t.M.PauseService(now, service), nil
}

// ResumeService implements Target.
func (t *ModelTarget) ResumeService(_ context.Context, now time.Time, service string) (protocol.Reply, error) {
	return t.M.ResumeService(now, service), nil
}

// Sweep implements Target.
func (t *ModelTarget) Sweep(_ context.Context, now time.Time) (protocol.SweepResult, error) {
	return t.M.Sweep(now), nil
}

// Snapshot implements Target.
func (t *ModelTarget) Snapshot(context.Context) (protocol.Snapshot, error) {
	return t.M.Snapshot(), nil
}

// CheckInvariants implements Target.
func (t *ModelTarget) CheckInvariants(context.Context) ([]string, error) {
	vs := t.M.CheckInvariants()
	if len(vs) == 0 {
		return nil, nil
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return out, nil
}

// Close implements Target.
func (t *ModelTarget) Close() error { return nil }
