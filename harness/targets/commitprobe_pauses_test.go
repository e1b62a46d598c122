package targets

import (
	"testing"

	"github.com/rendermac/rendermac/harness/fuzz"
)

// The three-way campaign's first target is the model behind a CommitProbe;
// the runner counts the pause rule's leases and sweeps through fuzz.Pauses
// on that target, so the probe must pass them through (it did not, and the
// three-way coverage never reached paused_lease or paused_expiry).
func TestCommitProbeAnswersForTheModelsPauses(t *testing.T) {
	var target fuzz.Target = NewCommitProbe(fuzz.NewModelTarget(1, ""))
	if _, ok := target.(fuzz.Pauses); !ok {
		t.Fatal("a CommitProbe over the model does not implement fuzz.Pauses")
	}
	if _, ok := target.(fuzz.LiveAttempts); !ok {
		t.Fatal("a CommitProbe over the model does not implement fuzz.LiveAttempts")
	}
}
