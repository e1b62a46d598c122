package scenarios

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// s3Scenarios are the catalogue entries that run on S3 artifacts in the
// package tests: the object-store outage (the real versitygw process
// stopped and restarted) and the PUTs of other bytes to a claimed output
// key, after commit_ok and (with -tags faultpoints) after the claim and
// during verification, which the bucket refuses, and every kind of grant
// the bucket presigns, with the sealed copies it serves (grant_kinds).
var s3Scenarios = []string{"artifact_store_outage", "late_upload_after_commit", "upload_after_claim", "upload_during_verification",
	"grant_kinds"}

func catalogueEntry(t *testing.T, name string) Scenario {
	t.Helper()
	for _, s := range Catalogue() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no scenario %s", name)
	return Scenario{}
}

// TestS3Scenarios runs them on a real S3 server: each passes and reaches
// its branch, invariant 8 included (CheckOutputs over the served keys).
func TestS3Scenarios(t *testing.T) {
	env := scenarioEnv(t, EnvOptions{ArtifactsS3: true})
	for _, name := range s3Scenarios {
		t.Run(name, func(t *testing.T) {
			sc := catalogueEntry(t, name)
			skipUnlessRunnable(t, sc)
			res := RunScenario(context.Background(), env, sc)
			t.Logf("%s on S3 in %s: %s", name, res.Duration, res.Observed)
			require.True(t, res.Passed, "%v\n%s", res.Err, renderTimeline(res))
			require.True(t, res.Reached)
		})
	}
}

// TestS3LateUploadFailsWhenTheUnsealedKeyIsServed: the broken variant that
// serves (and verifies) the attempt's own key instead of a sealed copy lets
// the late PUT change the bytes served, and the stored-output check says so.
func TestS3LateUploadFailsWhenTheUnsealedKeyIsServed(t *testing.T) {
	env := scenarioEnv(t, EnvOptions{ArtifactsS3: true, HarnessVariant: VariantUnsealedOutputs})
	res := RunScenario(context.Background(), env, catalogueEntry(t, "late_upload_after_commit"))
	require.False(t, res.Passed, "%s\n%s", res.Observed, renderTimeline(res))
	require.Error(t, res.Err)
	require.True(t, strings.Contains(res.Err.Error(), "stored output") && strings.Contains(res.Err.Error(), "sha256"),
		"it must fail on the served bytes: %v", res.Err)
	t.Logf("fails as it must: %v", firstLine(res.Err))
}

// A step's store= option names a store kind or the script is refused.
func TestStepStoreOption(t *testing.T) {
	st, err := parseStep(1, "reached counter upload.landed store=s3")
	require.NoError(t, err)
	require.Equal(t, "s3", st.opt("store", ""))
	require.Equal(t, []string{"counter", "upload.landed"}, st.args)
	_, err = parseStep(1, "reached counter c store=gcs")
	require.ErrorContains(t, err, "want store=fs or store=s3")
}
