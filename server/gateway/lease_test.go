package gateway

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/grant"
)

func TestLeaseOfferCarriesWhatTheAgentNeeds(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	jobID := b.createJob(t, false)
	c := b.connect(t, token1, 1, 1)
	o := deviceclient.Expect[protocol.LeaseOffer](t, c)
	require.Equal(t, jobID, o.JobID)
	require.True(t, protocol.ValidID(o.AttemptID))
	require.Equal(t, 1, o.AttemptNumber)
	require.Equal(t, 1, o.LeaseEpoch)
	require.Equal(t, t0.Add(ttl), o.LeaseExpiresAt)
	require.Equal(t, service, o.Service)
	require.Equal(t, map[string]string{"seed": "s1"}, o.Params)
	require.Equal(t, int64(123), o.Input.Bytes)
	require.Equal(t, inputSHA, o.Input.SHA256)
	require.Equal(t, protocol.OutputKey(jobID, o.AttemptID), o.Output.Key)

	// Only the token's hash is stored, and it is this token's.
	var hash string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT commit_token_hash FROM job_attempts WHERE id = $1`, o.AttemptID).Scan(&hash))
	require.Equal(t, protocol.HashCommitToken(o.CommitToken), hash)

	// The grants open exactly the job's input (get) and the attempt's output (put).
	inKey, inQ := parseGrant(t, o.Input.URL)
	require.Equal(t, protocol.InputKey(jobID), inKey)
	require.NoError(t, b.signer.Check(grant.Get, inKey, inQ, t0))
	require.Error(t, b.signer.Check(grant.Put, inKey, inQ, t0))
	outKey, outQ := parseGrant(t, o.Output.UploadURL)
	require.Equal(t, o.Output.Key, outKey)
	require.NoError(t, b.signer.Check(grant.Put, outKey, outQ, t0.Add(DefaultGrantTTL-1)))
	require.ErrorIs(t, b.signer.Check(grant.Put, outKey, outQ, t0.Add(DefaultGrantTTL)), grant.ErrExpired)
	require.ErrorIs(t, b.signer.Check(grant.Put, protocol.OutputKey(jobID, jobID), outQ, t0), grant.ErrBadSig)
	// The counter is bumped once the write returned, which may be just
	// after the client read the frame.
	require.Eventually(t, func() bool { return metricValue(b.m.Leases) == 1.0 }, deviceclient.Timeout, tick)
}

func parseGrant(t *testing.T, raw string) (string, url.Values) {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(u.Path, grant.PathPrefix), u.Path)
	return strings.TrimPrefix(u.Path, grant.PathPrefix), u.Query()
}

// Offers fill exactly the free slots, oldest job first; a slots report
// opens more.
func TestOffersFillOnlyFreeSlotsOldestFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	jobs := queuedInOrder(t, b, 3)
	c := b.connect(t, token1, 4, 2)
	require.Equal(t, jobs[0], deviceclient.Expect[protocol.LeaseOffer](t, c).JobID)
	require.Equal(t, jobs[1], deviceclient.Expect[protocol.LeaseOffer](t, c).JobID)
	require.Eventually(t, func() bool { return sessionFree(b, device1) == 0 }, deviceclient.Timeout, tick)
	requireLiveAttempts(t, b, device1, 2)
	deviceclient.MustSend(t, c, &protocol.Slots{Type: protocol.TypeSlots, SlotsFree: 1})
	require.Equal(t, jobs[2], deviceclient.Expect[protocol.LeaseOffer](t, c).JobID)
	requireLiveAttempts(t, b, device1, 3)
}

// An idle session hears of a new job through JobsChannel.
func TestJobsNotificationWakesAnIdleSession(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c := b.connect(t, token1, 1, 1)
	jobID := b.createJob(t, true)
	require.Equal(t, jobID, deviceclient.Expect[protocol.LeaseOffer](t, c).JobID)
}

// Without any notification the poll finds the job (database clock, real timers).
func TestPollFallbackFindsUnannouncedJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Clock: realClock, PollInterval: 20 * time.Millisecond})
	c := b.connect(t, token1, 1, 1)
	jobID := b.createJob(t, false)
	require.Equal(t, jobID, deviceclient.Expect[protocol.LeaseOffer](t, c).JobID)
}

// A device offering another service is not offered the job.
func TestOffersMatchTheServicesOfHello(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.createJob(t, false)
	c := b.dial(t, token1)
	deviceclient.MustHello(t, c, []string{"ffmpeg.h264_720p"}, 1, 1)
	require.Eventually(t, func() bool { return sessionFree(b, device1) == 1 && !offering(b, device1) },
		deviceclient.Timeout, tick)
	requireLiveAttempts(t, b, device1, 0)
}

// queuedInOrder queues n jobs a millisecond apart (distinct created_at),
// so that "oldest" is their creation order, not their ids'.
func queuedInOrder(t *testing.T, b *bundle, n int) []string {
	t.Helper()
	jobs := make([]string, 0, n)
	for range n {
		b.clock.Advance(time.Millisecond)
		jobs = append(jobs, b.createJob(t, false))
	}
	return jobs
}

// offering reports whether the device's session is between claim and write.
func offering(b *bundle, deviceID string) bool {
	return anySession(b, deviceID, func(s *session) bool { return s.offering > 0 })
}

// anySession reports whether f holds of one of the device's sessions, read
// under its lock.
func anySession(b *bundle, deviceID string, f func(*session) bool) bool {
	for _, s := range b.gw.sessionsOf(deviceID) {
		s.mu.Lock()
		ok := f(s)
		s.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}
