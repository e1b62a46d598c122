package deviceclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/rendermac/rendermac/protocol"
)

// Expect returns the next frame, failing t unless it arrives within Timeout
// and is a *T.
func Expect[T any](t testing.TB, c *Client) *T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	msg, err := c.Next(ctx)
	if err != nil {
		t.Fatalf("expected %T: %v", new(T), err)
	}
	m, ok := msg.(*T)
	if !ok {
		t.Fatalf("expected %T, got %T %+v", new(T), msg, msg)
	}
	return m
}

// ExpectNone fails t unless no frame arrives within d (what names what
// must not happen).
func ExpectNone(t testing.TB, c *Client, d time.Duration, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	msg, err := c.Next(ctx)
	switch {
	case err == nil:
		t.Fatalf("%s: got %T %+v", what, msg, msg)
	case !errors.Is(err, context.DeadlineExceeded):
		t.Fatalf("%s: waiting for no frame: %v", what, err)
	}
}

// MustSend sends msg or fails t.
func MustSend(t testing.TB, c *Client, msg any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := c.Send(ctx, msg); err != nil {
		t.Fatalf("send %T: %v", msg, err)
	}
}

// MustSendRaw sends data as a text frame or fails t.
func MustSendRaw(t testing.TB, c *Client, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := c.SendRaw(ctx, data); err != nil {
		t.Fatalf("send raw frame: %v", err)
	}
}

// MustHello sends hello and returns the welcome, or fails t.
func MustHello(t testing.TB, c *Client, services []string, slotsTotal, slotsFree int) *protocol.Welcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	w, err := c.Hello(ctx, services, slotsTotal, slotsFree)
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	return w
}

// ExpectClosed waits for the session to end and fails t unless it was
// closed with code.
func ExpectClosed(t testing.TB, c *Client, code websocket.StatusCode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	got, err := c.Wait(ctx)
	if err != nil {
		t.Fatalf("expected close %d: %v", code, err)
	}
	if got != code {
		t.Fatalf("expected close status %d, got %d", code, got)
	}
}

// Progress builds a progress frame for an offer.
func Progress(o *protocol.LeaseOffer, phase protocol.AttemptStatus) *protocol.Progress {
	return &protocol.Progress{Type: protocol.TypeProgress, JobID: o.JobID, AttemptID: o.AttemptID,
		LeaseEpoch: o.LeaseEpoch, Phase: phase}
}

// Commit builds a commit frame for an offer with the given output.
func Commit(o *protocol.LeaseOffer, out protocol.Output) *protocol.Commit {
	return &protocol.Commit{Type: protocol.TypeCommit, JobID: o.JobID, AttemptID: o.AttemptID,
		LeaseEpoch: o.LeaseEpoch, CommitToken: o.CommitToken, Output: out}
}

// Fail builds a fail frame for an offer.
func Fail(o *protocol.LeaseOffer, code protocol.FailureCode) *protocol.Fail {
	return &protocol.Fail{Type: protocol.TypeFail, JobID: o.JobID, AttemptID: o.AttemptID,
		LeaseEpoch: o.LeaseEpoch, CommitToken: o.CommitToken, FailureCode: code, Message: "deviceclient"}
}
