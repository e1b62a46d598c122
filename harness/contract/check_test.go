package contract

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rendermac/rendermac/docs"
)

// failed returns the results that did not pass, by table.
func failed(rs []Result) map[string]Result {
	out := map[string]Result{}
	for _, r := range rs {
		if !r.Passed() {
			out[r.Table] = r
		}
	}
	return out
}

func TestProtocolAgreesWithContract(t *testing.T) {
	rs := CheckEmbedded()
	if len(rs) != 14 {
		t.Fatalf("want 14 tables checked, got %d", len(rs))
	}
	for _, r := range rs {
		if !r.Passed() {
			t.Errorf("%s (%s): %s", r.Table, r.Source, r.Detail)
		}
		if !strings.HasPrefix(r.Source, "docs/") || r.Contract == "" {
			t.Errorf("%s: want a source in docs/ and what the contract says, got %q, %q", r.Table, r.Source, r.Contract)
		}
		t.Logf("%-45s %-22s %s", r.Table, r.Source, r.Contract)
	}
}

// TestMovedCodeIsReported moves internal_error from the retryable list to
// the non-retryable one in the text: both lists must report it.
func TestMovedCodeIsReported(t *testing.T) {
	spec := strings.Replace(docs.SPEC, "`provider_offline`, `internal_error` [R:fail.retryable]. Not retryable:", "`provider_offline` [R:fail.retryable]. Not retryable: `internal_error`,", 1)
	if spec == docs.SPEC {
		t.Fatal("the SPEC's retryable list moved: update the test's edit")
	}
	f := failed(Check(spec, docs.Semantics, Protocol()))
	// The lists' lines, found in the text (not fixed: the SPEC grows).
	at := strings.Count(spec[:strings.Index(spec, "Retryable: `no_capacity`")], "\n") + 1
	lines := []string{fmt.Sprintf("docs/SPEC.md:%d", at), fmt.Sprintf("docs/SPEC.md:%d", at+1)}
	for _, table := range []string{"retryable failure codes", "non-retryable failure codes"} {
		if r, ok := f[table]; !ok || !strings.Contains(r.Detail, "`internal_error`") || !slices.Contains(lines, r.Source) {
			t.Errorf("%s: want internal_error reported at its SPEC line, got %+v", table, r)
		}
	}
	if len(f) != 2 {
		t.Errorf("want exactly the two code lists to fail, got %v", f)
	}
}

// TestAlteredProtocolIsReported alters protocol's side of each table.
func TestAlteredProtocolIsReported(t *testing.T) {
	cases := []struct {
		table, want string
		alter       func(*Tables)
	}{
		// Moved between the lists: both lists report it (the other is checked below).
		{"retryable failure codes", "`no_capacity`", func(x *Tables) { x.Retryable["no_capacity"] = false }},
		{"non-retryable failure codes", "`runner_failed`", func(x *Tables) { x.Retryable["runner_failed"] = true }},
		{"control-plane failure codes", "`offer_withdrawn` is in the contract's list", func(x *Tables) {
			x.ControlPlaneCodes = x.ControlPlaneCodes[:1]
		}},
		{"job statuses and transitions", "cancelling -> succeeded", func(x *Tables) {
			x.JobNext["cancelling"] = append(x.JobNext["cancelling"], "succeeded")
		}},
		{"attempt statuses, phase ranks, live and terminal", "`running`: rank 3", func(x *Tables) { x.PhaseRank["running"] = 2 }},
		{"attempt transitions", "committing -> lost", func(x *Tables) { x.AttemptNext["committing"] = append(x.AttemptNext["committing"], "lost") }},
		{"max_attempts bounds and default", "MaxAttemptsMax is 11", func(x *Tables) { x.MaxAttemptsMax = 11 }},
		{"commit token size, alphabet and hash", "CommitTokenBytes is 23", func(x *Tables) { x.TokenBytes = 23 }},
		{"commit token size, alphabet and hash", "not unpadded base64url", func(x *Tables) {
			x.Tokens[3].Plaintext = strings.Replace(x.Tokens[3].Plaintext, x.Tokens[3].Plaintext[:1], "+", 1)
		}},
		{"wire frame read limit", "ReadLimitBytes is 65535", func(x *Tables) { x.ReadLimitBytes-- }},
		{"lease_conflict reasons", "order differs", func(x *Tables) {
			x.ConflictReasons[0], x.ConflictReasons[1] = x.ConflictReasons[1], x.ConflictReasons[0]
		}},
		{"reply and failure codes named", `"lease_expird"`, func(x *Tables) { x.Codes = append(x.Codes, "lease_expird") }},
		{"CreateJob validation order", "order differs", func(x *Tables) {
			x.CreateJobFields[2], x.CreateJobFields[3] = x.CreateJobFields[3], x.CreateJobFields[2]
		}},
		{"journal actors", "`verify`", func(x *Tables) { x.Actors[3] = "verify" }},
		{"admission window bounds", "AdmissionWindowMax", func(x *Tables) { x.AdmissionWindowMax /= 7 }},
	}
	for _, c := range cases {
		tb := Protocol()
		c.alter(&tb)
		f := failed(Check(docs.SPEC, docs.Semantics, tb))
		r, ok := f[c.table]
		if !ok || !strings.Contains(r.Detail, c.want) {
			t.Errorf("%s altered: want a failure mentioning %q, got %+v", c.table, c.want, r)
		}
		if _, both := f["non-retryable failure codes"]; both && f["retryable failure codes"].Detail != "" {
			delete(f, "retryable failure codes") // a code moved between the lists fails both
			delete(f, "non-retryable failure codes")
			f[c.table] = r
		}
		if len(f) != 1 {
			t.Errorf("%s altered: want only that table to fail, got %d: %v", c.table, len(f), f)
		}
	}
}

// TestAgentCodeMadeControlPlaneIsReported: a code the text keeps for the
// control plane that protocol lets an agent send is reported.
func TestAgentCodeMadeControlPlaneIsReported(t *testing.T) {
	tb := Protocol()
	tb.FailureCodes = append(tb.FailureCodes, "offer_withdrawn")
	tb.Retryable["offer_withdrawn"] = false
	r, ok := failed(Check(docs.SPEC, docs.Semantics, tb))["control-plane failure codes"]
	if !ok || !strings.Contains(r.Detail, "lets an agent send it") {
		t.Errorf("want offer_withdrawn reported as sendable by an agent, got %+v", r)
	}
}

// TestUnreadableTextIsReported: a list the parser cannot find fails its
// table, naming the file and what it looked for; nothing passes silently.
func TestUnreadableTextIsReported(t *testing.T) {
	spec := strings.Replace(docs.SPEC, "Retryable:", "Requeueable:", 1)
	r := failed(Check(spec, docs.Semantics, Protocol()))["retryable failure codes"]
	if r.Source != "docs/SPEC.md" || !strings.Contains(r.Detail, "cannot find retryable failure codes") {
		t.Errorf("want an unreadable-text failure naming SPEC.md, got %+v", r)
	}
	if f := failed(Check("", "", Protocol())); len(f) != 14 {
		t.Errorf("empty documents: want every table to fail, got %d", len(f))
	}
	spec = strings.Replace(docs.SPEC, "verifying:  succeeded", "verifying   succeeded", 1)
	r = failed(Check(spec, docs.Semantics, Protocol()))["job statuses and transitions"]
	if !strings.Contains(r.Detail, `has no "from: to" form`) || !strings.HasPrefix(r.Detail, "docs/SPEC.md:") {
		t.Errorf("want the malformed table line named with its SPEC line, got %+v", r)
	}
}

func TestTokenForm(t *testing.T) {
	n, alphabet, err := TokenForm(docs.SPEC)
	if err != nil || n != 32 || len(alphabet) != 64 || strings.ContainsAny(alphabet, "+/=") {
		t.Fatalf("want 32 base64url characters, got %d %q %v", n, alphabet, err)
	}
	if _, _, err := TokenForm(strings.Replace(docs.SPEC, "random bytes", "bytes", 1)); err == nil {
		t.Fatal("a token row without its byte count must be an error")
	}
}
