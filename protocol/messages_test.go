package protocol

import "testing"

// TestAnswerAbout names the job and attempt of each answer to a device
// frame and of nothing else.
func TestAnswerAbout(t *testing.T) {
	const j, a = "job", "attempt"
	for _, msg := range []any{&ProgressOK{JobID: j, AttemptID: a}, &LeaseConflict{JobID: j, AttemptID: a},
		&CommitOK{JobID: j, AttemptID: a}, &CommitRejected{JobID: j, AttemptID: a},
		&FailOK{JobID: j, AttemptID: a}, &FailRejected{JobID: j, AttemptID: a}} {
		if gj, ga, ok := AnswerAbout(msg); !ok || gj != j || ga != a {
			t.Errorf("AnswerAbout(%T) = %q, %q, %v; want %q, %q, true", msg, gj, ga, ok, j, a)
		}
	}
	for _, msg := range []any{&LeaseOffer{JobID: j, AttemptID: a}, &Cancel{JobID: j, AttemptID: a}, &Welcome{}, nil} {
		if _, _, ok := AnswerAbout(msg); ok {
			t.Errorf("AnswerAbout(%T) is ok; it is no answer to a device frame", msg)
		}
	}
}
