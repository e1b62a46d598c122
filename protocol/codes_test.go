package protocol

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFailureCodeSpellings(t *testing.T) {
	t.Parallel()
	require.Equal(t, FailureCode("no_capacity"), FailNoCapacity)
	require.Equal(t, FailureCode("lease_expired"), FailLeaseExpired)
	require.Equal(t, FailureCode("download_failed"), FailDownloadFailed)
	require.Equal(t, FailureCode("upload_failed"), FailUploadFailed)
	require.Equal(t, FailureCode("provider_offline"), FailProviderOffline)
	require.Equal(t, FailureCode("internal_error"), FailInternalError)
	require.Equal(t, FailureCode("runner_failed"), FailRunnerFailed)
	require.Equal(t, FailureCode("verification_failed"), FailVerificationFailed)
	require.Equal(t, FailureCode("commit_conflict"), FailCommitConflict)
	require.Equal(t, FailureCode("buyer_cancelled"), FailBuyerCancelled)
	require.Equal(t, FailureCode("admission_expired"), FailAdmissionExpired)
}

func TestRetryableSetIsExact(t *testing.T) {
	t.Parallel()
	retryable := map[FailureCode]bool{
		"no_capacity": true, "lease_expired": true, "download_failed": true,
		"upload_failed": true, "provider_offline": true, "internal_error": true,
	}
	notRetryable := []FailureCode{"runner_failed", "verification_failed", "commit_conflict", "buyer_cancelled"}

	for c := range retryable {
		require.True(t, c.IsRetryable(), c)
		require.True(t, c.Valid(), c)
	}
	for _, c := range notRetryable {
		require.False(t, c.IsRetryable(), c)
		require.True(t, c.Valid(), c)
	}
	for _, c := range []FailureCode{"admission_expired", "", "bogus", "NO_CAPACITY", "no_capacity ", "lease-expired"} {
		require.False(t, c.IsRetryable(), "%q", c)
		require.False(t, c.Valid(), "%q must not be valid for an agent", c)
	}

	// FailureCodes is exactly the ten agent codes, no duplicates, retryable first.
	require.Len(t, FailureCodes, len(retryable)+len(notRetryable))
	seen := map[FailureCode]bool{}
	sawNonRetryable := false
	for _, c := range FailureCodes {
		require.False(t, seen[c], "duplicate %s", c)
		seen[c] = true
		require.Equal(t, retryable[c], c.IsRetryable(), c)
		if !c.IsRetryable() {
			sawNonRetryable = true
		} else {
			require.False(t, sawNonRetryable, "retryable %s listed after a non-retryable code", c)
		}
	}
	for _, c := range notRetryable {
		require.True(t, seen[c], c)
	}
	require.False(t, seen[FailAdmissionExpired])
}

func TestWireConstants(t *testing.T) {
	t.Parallel()
	require.Equal(t, 64*1024, ReadLimitBytes)
	require.Equal(t, "bad_message", CodeBadMessage)
	require.Equal(t, 24, CommitTokenBytes)
	for typ, want := range map[string]string{
		TypeHello: "hello", TypeSlots: "slots", TypeProgress: "progress", TypeFail: "fail", TypeCommit: "commit",
		TypeWelcome: "welcome", TypeLeaseOffer: "lease_offer", TypeProgressOK: "progress_ok",
		TypeLeaseConflict: "lease_conflict", TypeCancel: "cancel", TypeDrain: "drain", TypeCommitOK: "commit_ok",
		TypeCommitRejected: "commit_rejected", TypeFailOK: "fail_ok", TypeFailRejected: "fail_rejected", TypeError: "error",
	} {
		require.Equal(t, want, typ)
	}
}
