package targets

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
)

// deviceLiveness is what a frame's heartbeat writes: devices.status and
// devices.last_seen_at (nil: never seen).
type deviceLiveness struct {
	status   string
	lastSeen *time.Time
}

const (
	sqlDeviceLiveness = `SELECT id::text, status, last_seen_at FROM devices WHERE $1::text = '' OR id::text = $1`
	sqlRestoreDevice  = `
UPDATE devices SET status = $2, last_seen_at = $3
WHERE id = $1 AND (status <> $2 OR last_seen_at IS DISTINCT FROM $3::timestamptz)`
)

// liveness reads the liveness of one device, or of all when deviceID is "".
func (t *StackTarget) liveness(ctx context.Context, deviceID string) (map[string]deviceLiveness, error) {
	rows, err := t.r.pool.Query(ctx, sqlDeviceLiveness, deviceID)
	if err != nil {
		return nil, fmt.Errorf("read device liveness: %w", err)
	}
	defer rows.Close()
	out := map[string]deviceLiveness{}
	for rows.Next() {
		var d string
		var l deviceLiveness
		if err := rows.Scan(&d, &l.status, &l.lastSeen); err != nil {
			return nil, fmt.Errorf("read device liveness: %w", err)
		}
		out[d] = l
	}
	return out, rows.Err()
}

// restore puts device liveness back as it was and says how many rows it
// changed.
func (t *StackTarget) restore(ctx context.Context, before map[string]deviceLiveness) (int64, error) {
	var n int64
	for id, l := range before {
		tag, err := t.r.pool.Exec(ctx, sqlRestoreDevice, id, l.status, l.lastSeen)
		if err != nil {
			return n, fmt.Errorf("restore device liveness: %w", err)
		}
		n += tag.RowsAffected()
	}
	return n, nil
}

// undoHeartbeat is normalization 3: after a Lease the model answers
// without a heartbeat (no_slot, not_found), the slots report's heartbeat
// is undone.
func (t *StackTarget) undoHeartbeat(ctx context.Context, before map[string]deviceLiveness) error {
	n, err := t.restore(ctx, before)
	t.marks.HeartbeatsUndone.Add(n)
	return err
}

func (t *StackTarget) send(ctx context.Context, c *deviceclient.Client, msg any) error {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	if err := c.Send(ctx, msg); err != nil {
		return fmt.Errorf("send %T: %w", msg, err)
	}
	return nil
}

// next returns the next frame on c other than a cancel notice or a lost
// notice (lease_conflict attempt_lost after a sweep), which the frames
// gateway's listener may push at any time (they are counted).
func (t *StackTarget) next(ctx context.Context, c *deviceclient.Client) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	for {
		msg, err := c.Next(ctx)
		if err != nil {
			return nil, err
		}
		if _, ok := msg.(*protocol.Cancel); ok {
			t.marks.CancelNotices.Add(1)
			continue
		}
		if lc, ok := msg.(*protocol.LeaseConflict); ok && lc.Reason == protocol.ReasonAttemptLost {
			t.marks.LostNotices.Add(1)
			continue
		}
		return msg, nil
	}
}

// roundTrip sends a fenced frame on the device's frames session and returns
// the gateway's answer. Replies about one attempt come in frame order and
// every step waits for its reply, so the next frame is this one's answer;
// an answer about another attempt is an error.
func (t *StackTarget) roundTrip(ctx context.Context, dev string, msg any, jobID, attemptID string) (any, error) {
	c := t.frames[dev]
	if c == nil {
		return nil, fmt.Errorf("no frames session for device %s", dev)
	}
	if err := t.send(ctx, c, msg); err != nil {
		return nil, err
	}
	reply, err := t.next(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("answer to %T: %w", msg, err)
	}
	if j, a, ok := protocol.AnswerAbout(reply); ok && (j != jobID || a != attemptID) {
		return nil, fmt.Errorf("answer to %T about %s/%s is about %s/%s", msg, jobID, attemptID, j, a)
	}
	return reply, nil
}

// badEpoch maps a bad_message answer to the reply the contract gives the
// same frame (normalization 1). The strict decoder refuses lease_epoch < 1,
// which the harness sends as a wrong-epoch perturbation; no attempt has such
// an epoch, so the contract's first check fails: identity_mismatch for
// progress, commit_conflict for commit, and for fail bad_failure_code (checked
// first) or fail_conflict. Any other bad_message passes through as
// bad_message, which no target of the contract answers: a divergence.
func (t *StackTarget) badEpoch(m *protocol.ErrorMessage, epoch int, mapped protocol.Reply) protocol.Reply {
	if m.Code != protocol.CodeBadMessage || epoch >= 1 || !strings.Contains(m.Message, `"lease_epoch"`) {
		return protocol.Reply{Code: protocol.Code(m.Code), Message: m.Message}
	}
	t.marks.BadEpochFrames.Add(1)
	return mapped
}

// notCommittableStatus is the attempt status of an attempt_not_committable
// commit_rejected, which the wire carries only in its message (normalization 2).
func notCommittableStatus(message string) (protocol.AttemptStatus, error) {
	rest, ok := strings.CutPrefix(message, "attempt is ")
	status, _, ok2 := strings.Cut(rest, ",")
	if !ok || !ok2 || !protocol.AttemptStatus(status).Valid() {
		return "", fmt.Errorf("attempt_not_committable without an attempt status in %q", message)
	}
	return protocol.AttemptStatus(status), nil
}
