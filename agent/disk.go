package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/rendermac/rendermac/protocol"
)

// A Mac's disk fills up: the work dir is where inputs and outputs live while
// attempts run, and other programs share its file system. Three rules keep a
// full disk from failing buyers' jobs for good:
//   - before an offer is taken, the work dir's file system must have
//     MinFreeBytes free; while it has not, the agent reports no free slot
//     (hello and slots) and refuses an offer that still arrives with
//     no_capacity, which is retryable;
//   - a step that fails because the disk is full (ENOSPC or EDQUOT in its
//     error or "no space left on device" in its text, as FFmpeg reports it,
//     or the file system below MinFreeBytes when it failed) ends the attempt with no_capacity, so
//     the job is requeued for another device instead of failing as
//     runner_failed;
//   - attempt directories a crash left behind are removed when the agent
//     starts, so they do not eat the space.

// checkDiskLocked looks at the work dir's free space and records whether it
// is short. It reports the free bytes (-1 when the file system cannot say).
func (a *Agent) checkDiskLocked() int64 {
	if a.cfg.MinFreeBytes < 0 {
		a.lowDisk = false
		return -1
	}
	free, ok := a.cfg.FreeBytes(a.cfg.WorkDir)
	if !ok {
		a.lowDisk = false
		return -1
	}
	low := free < a.cfg.MinFreeBytes
	if low != a.lowDisk {
		if low {
			a.log.Warn("work dir short of space; taking no offers", "free_bytes", free, "min_free_bytes", a.cfg.MinFreeBytes)
		} else {
			a.log.Info("work dir has space again; taking offers", "free_bytes", free, "min_free_bytes", a.cfg.MinFreeBytes)
		}
		a.lowDisk = low
		signal(a.wake)
	}
	return free
}

// diskFull reports whether err, returned by a step that wrote into the work
// dir, means the disk is full.
func (a *Agent) diskFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	// FFmpeg reports ENOSPC only as strerror text on its stderr, which the
	// runner's error carries; by the time it exits the space may be back.
	if strings.Contains(strings.ToLower(err.Error()), "no space left on device") {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.checkDiskLocked()
	return a.lowDisk
}

// fullDiskCode is the failure code of a step that failed on a full disk.
func (a *Agent) fullDiskCode() protocol.FailureCode {
	if a.v.diskFullNotRetryable() {
		return protocol.FailRunnerFailed
	}
	return protocol.FailNoCapacity
}

// stepped is the package's stepped for a step that writes into the work
// dir: a failure on a full disk is no_capacity instead of code.
func (a *Agent) stepped(at *attempt, code protocol.FailureCode, err error) (*decision, bool) {
	if at.ctx.Err() == nil && a.diskFull(err) {
		code, err = a.fullDiskCode(), fmt.Errorf("work dir out of space: %w", err)
	}
	return stepped(at, code, err)
}

// removeStaleAttempts deletes attempt directories left in the work dir by a
// previous run that did not end cleanly (a crash, a power loss): at start no
// attempt runs, so every directory named like an attempt id is stale.
// Anything else in the work dir is left alone.
func (a *Agent) removeStaleAttempts() {
	entries, err := os.ReadDir(a.cfg.WorkDir)
	if err != nil {
		a.log.Warn("list work dir for stale attempts", "err", err)
		return
	}
	removed := 0
	for _, e := range entries {
		if !e.IsDir() || !protocol.ValidID(e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(a.cfg.WorkDir, e.Name())); err != nil {
			a.log.Warn("remove stale attempt dir", "dir", e.Name(), "err", err)
			continue
		}
		removed++
	}
	if removed > 0 {
		a.log.Info("removed stale attempt dirs left by a previous run", "count", removed)
	}
}
