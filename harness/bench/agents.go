package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rendermac/rendermac/harness/loadgen"
	"github.com/rendermac/rendermac/protocol"
)

// connect dials and hellos the first n devices as agents and starts their
// loops: the fleet hands every offer to work.
func (d *driver) connect(ctx context.Context, n int) error {
	d.fleet = loadgen.NewFleet(loadgen.FleetConfig{BaseURL: d.baseURL, Service: benchService, Slots: d.cfg.Slots,
		HTTP: d.httpc, DialTimeout: 30 * time.Second, ReplyTimeout: 60 * time.Second, Dialers: dialers,
		Work: d.work, OnError: d.fail}, d.devices[:n])
	return d.fleet.Start(ctx)
}

// work takes one offer through progress (heartbeating while the progress
// phase holds it), the upload and the commit, timing each step.
func (d *driver) work(ctx context.Context, at *loadgen.Attempt) error {
	o := at.Offer
	now := time.Now()
	d.mu.Lock()
	d.offers++
	if d.firstOffer.IsZero() {
		d.firstOffer = now
	}
	d.lastOffer = now
	d.jobAt[o.JobID] = jobTimes{offered: now}
	d.mu.Unlock()
	if d.peak.Load() {
		d.rec.add(opLease, now.Sub(at.Freed))
	}
	if d.progressing.Load() {
		d.holding.Add(1)
		for d.progressing.Load() {
			ok, err := d.progress(ctx, at)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if d.counting.Load() {
				d.progressOK.Add(1)
			}
		}
		d.holding.Add(-1)
	}
	if ok, err := d.progress(ctx, at); err != nil {
		return err
	} else if !ok {
		return errors.New("lease_conflict on uploading")
	}
	out, err := d.upload(ctx, at)
	if err != nil {
		return err
	}
	start := time.Now()
	msg, done, err := at.Commit(ctx, out)
	if err != nil {
		return err
	}
	switch m := msg.(type) {
	case *protocol.CommitOK:
		d.rec.add(opCommit, done.Sub(start))
		d.mu.Lock()
		t := d.jobAt[o.JobID]
		t.sent, t.done = start, done
		d.jobAt[o.JobID] = t
		d.lastCommit = done
		d.mu.Unlock()
		d.commits.Add(1)
	case *protocol.CommitRejected:
		d.rejected.Add(1)
		return fmt.Errorf("commit_rejected %s: %s", m.Code, m.Message)
	default:
		return fmt.Errorf("after commit: unexpected %T %+v", msg, msg)
	}
	return nil
}

// progress reports uploading and waits for the answer; false on
// lease_conflict.
func (d *driver) progress(ctx context.Context, at *loadgen.Attempt) (bool, error) {
	start := time.Now()
	msg, err := at.Progress(ctx, protocol.AttemptUploading)
	if err != nil {
		return false, err
	}
	switch m := msg.(type) {
	case *protocol.ProgressOK:
		d.rec.add(opProgress, time.Since(start))
		return true, nil
	case *protocol.LeaseConflict:
		d.conflicts.Add(1)
		return false, nil
	default:
		return false, fmt.Errorf("after progress: unexpected %T %+v", m, m)
	}
}

// upload PUTs a small valid MP4 to the offer's grant URL.
func (d *driver) upload(ctx context.Context, at *loadgen.Attempt) (protocol.Output, error) {
	start := time.Now()
	out, err := at.Upload(ctx)
	if err == nil {
		d.rec.add(opUpload, time.Since(start))
	}
	return out, err
}
