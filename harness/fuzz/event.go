package fuzz

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// Op is an event kind of the generator's alphabet.
type Op uint8

// Ops. CommitBegin and CommitFinish split a commit around verification so
// that other events (a cancel, a sweep) can land between its transactions.
const (
	OpCreate Op = iota
	OpLease
	OpProgress
	OpCommit
	OpCommitBegin
	OpCommitFinish
	OpFail
	OpCancel
	OpTick
	OpSweep
	// OpUpload PUTs other bytes to an attempt's output key (a re-upload
	// while it runs, or a late one after its claim, which must be refused).
	OpUpload
	// OpBoundary is a tick that lands on a time boundary of the state (a
	// lease expiry, an admission deadline, a device's heartbeat deadline)
	// or one microsecond either side: where `<` and `<=` part.
	OpBoundary
	// OpWithdraw is the gateway taking back an offer it leased but could
	// not deliver (SPEC section 3, Withdraw): fenced like a fail, and
	// refused once the device acted on the offer.
	OpWithdraw
	// OpPause and OpResume are an operator pausing and resuming a
	// service (SPEC section 3, "Pausing a service"): the matcher offers no
	// job of a paused service, whose queued jobs still expire.
	OpPause
	OpResume
	opCount
)

var opNames = [opCount]string{"create", "lease", "progress", "commit", "commit_begin", "commit_finish", "fail", "cancel", "tick", "sweep", "upload",
	"boundary", "withdraw", "pause", "resume"}

// Boundary is the kind of instant a boundary tick lands on.
type Boundary uint8

// Boundaries: every rule of SPEC section 3 that compares now with a stored
// instant.
const (
	// BoundaryLease is a live attempt's lease_expires_at (progress, commit
	// and the sweeper's lost and re-verification steps).
	BoundaryLease Boundary = iota
	// BoundaryDeadline is a non-terminal job's admission_deadline (lease's
	// pick, requeue, the sweeper's admission_expired).
	BoundaryDeadline
	// BoundaryHeartbeat is an online device's last_seen_at plus the
	// heartbeat window (the sweeper's offline step).
	BoundaryHeartbeat
	boundaryCount
)

var boundaryNames = [boundaryCount]string{"lease_expiry", "admission_deadline", "heartbeat"}

func (b Boundary) String() string {
	if b < boundaryCount {
		return boundaryNames[b]
	}
	return "boundary(" + strconv.Itoa(int(b)) + ")"
}

func (o Op) String() string {
	if o < opCount {
		return opNames[o]
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// TokenKind says which commit token a commit or fail presents.
type TokenKind uint8

// Token kinds: the attempt's own, a random wrong one, or the token of the
// job's previous attempt (a worker that kept an old secret).
const (
	TokenRight TokenKind = iota
	TokenWrong
	TokenStale
)

var tokenNames = []string{"right", "wrong", "stale"}

// Event is one symbolic step. Indexes are resolved at apply time: Job picks
// a job in the view's aim order (jobs with a live attempt first, then the
// others, each most recently leased first; modulo the jobs that exist),
// Attempt 0 is the job's latest attempt and k > 0 the k-th before it,
// Device -1 is the attempt's owner and Buyer -1 the job's buyer.
type Event struct {
	Op       Op
	Job      int
	Attempt  int
	Device   int
	Buyer    int
	Epoch    int // added to the attempt's lease epoch: 0 is right
	Token    TokenKind
	Phase    protocol.AttemptStatus
	Code     protocol.FailureCode
	OutputOK bool
	Advance  time.Duration
	// boundary only: which instant (Job picks among those after now, in
	// time order), OffsetUs microseconds from it (-1, 0 or 1); Advance is
	// the tick taken when the state has no such instant after now.
	At       Boundary
	OffsetUs int

	// create, pause and resume.
	Service string
	// create only.
	MaxAttempts int
	WindowSec   int
	IdemKey     int // 0: no idempotency key
	Param       int
}

// String renders the event as one line of a replay file; ParseEvent reads it back.
func (e Event) String() string {
	var b strings.Builder
	b.WriteString(e.Op.String())
	kv := func(k string, v any) { fmt.Fprintf(&b, " %s=%v", k, v) }
	switch e.Op {
	case OpCreate:
		kv("buyer", e.Buyer)
		kv("service", e.Service)
		kv("max", e.MaxAttempts)
		kv("window", e.WindowSec)
		kv("idem", e.IdemKey)
		kv("param", e.Param)
	case OpLease:
		kv("dev", e.Device)
	case OpProgress, OpCommit, OpCommitBegin, OpCommitFinish, OpFail, OpWithdraw:
		kv("job", e.Job)
		kv("att", e.Attempt)
		if e.Op != OpCommitFinish {
			kv("dev", e.Device)
			kv("epoch", e.Epoch)
		}
		switch e.Op {
		case OpProgress:
			kv("phase", e.Phase)
		case OpFail:
			kv("token", tokenNames[e.Token])
			kv("code", e.Code)
		case OpWithdraw:
			kv("token", tokenNames[e.Token])
		case OpCommit, OpCommitBegin:
			kv("token", tokenNames[e.Token])
			kv("ok", e.OutputOK)
		}
	case OpCancel:
		kv("job", e.Job)
		kv("buyer", e.Buyer)
	case OpUpload:
		kv("job", e.Job)
		kv("att", e.Attempt)
	case OpTick:
		kv("ms", e.Advance.Milliseconds())
	case OpPause, OpResume:
		kv("service", e.Service)
	case OpBoundary:
		kv("at", e.At)
		kv("off", e.OffsetUs)
		kv("job", e.Job)
		kv("ms", e.Advance.Milliseconds())
	}
	return b.String()
}

// ParseEvent reads one line written by Event.String.
func ParseEvent(line string) (Event, error) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return Event{}, fmt.Errorf("empty event line")
	}
	ev := Event{Device: -1, Buyer: -1}
	found := false
	for i, n := range opNames {
		if n == fields[0] {
			ev.Op, found = Op(i), true
		}
	}
	if !found {
		return Event{}, fmt.Errorf("unknown op %q", fields[0])
	}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return Event{}, fmt.Errorf("field %q: want key=value", f)
		}
		if err := ev.set(k, v); err != nil {
			return Event{}, fmt.Errorf("field %q: %w", k, err)
		}
	}
	return ev, nil
}

func (e *Event) set(k, v string) error {
	atoi := func(dst *int) error {
		n, err := strconv.Atoi(v)
		*dst = n
		return err
	}
	switch k {
	case "buyer":
		return atoi(&e.Buyer)
	case "service":
		e.Service = v
	case "max":
		return atoi(&e.MaxAttempts)
	case "window":
		return atoi(&e.WindowSec)
	case "idem":
		return atoi(&e.IdemKey)
	case "param":
		return atoi(&e.Param)
	case "dev":
		return atoi(&e.Device)
	case "job":
		return atoi(&e.Job)
	case "att":
		return atoi(&e.Attempt)
	case "epoch":
		return atoi(&e.Epoch)
	case "phase":
		e.Phase = protocol.AttemptStatus(v)
	case "code":
		e.Code = protocol.FailureCode(v)
	case "ok":
		b, err := strconv.ParseBool(v)
		e.OutputOK = b
		return err
	case "token":
		for i, n := range tokenNames {
			if n == v {
				e.Token = TokenKind(i)
				return nil
			}
		}
		return fmt.Errorf("unknown token kind %q", v)
	case "at":
		for i, n := range boundaryNames {
			if n == v {
				e.At = Boundary(i)
				return nil
			}
		}
		return fmt.Errorf("unknown boundary %q", v)
	case "off":
		return atoi(&e.OffsetUs)
	case "ms":
		var ms int
		err := atoi(&ms)
		e.Advance = time.Duration(ms) * time.Millisecond
		return err
	default:
		return fmt.Errorf("unknown key")
	}
	return nil
}
