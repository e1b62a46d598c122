package fuzz

import "time"

// WorldBuyer and WorldDevice describe the fixed cast every run starts with.
type WorldBuyer struct {
	ID           string
	BalanceCents int64
}

// WorldDevice is a paired device of the cast.
type WorldDevice struct {
	ID         string
	Services   []string
	SlotsTotal int
}

// WorldOperatorRow is the world's operator: its id, name and bearer
// credential (the API's admin routes take it).
type WorldOperatorRow struct{ ID, Name, Credential string }

// The cast: a rich buyer, a poor one (so insufficient_funds happens), and
// three devices with overlapping services and slots.
var (
	WorldBuyers = []WorldBuyer{
		{ID: "b0000000-0000-4000-8000-000000000001", BalanceCents: 2000},
		{ID: "b0000000-0000-4000-8000-000000000002", BalanceCents: 150},
	}
	WorldDevices = []WorldDevice{
		{ID: "d0000000-0000-4000-8000-000000000001", Services: []string{"synthetic.mp4", "ffmpeg.h264_720p"}, SlotsTotal: 2},
		{ID: "d0000000-0000-4000-8000-000000000002", Services: []string{"synthetic.mp4"}, SlotsTotal: 1},
		{ID: "d0000000-0000-4000-8000-000000000003", Services: []string{"ffmpeg.h264_720p", "ffmpeg.h264_1080p"}, SlotsTotal: 1},
	}
	// WorldOperator is the operator who pauses and resumes services; the
	// Postgres targets seed it (operators row) with WorldOperatorCredential.
	WorldOperator = WorldOperatorRow{ID: "0e000000-0000-4000-8000-000000000001", Name: "operator-1",
		Credential: "rmo_fuzz-world-operator-credential-not-a-secret"}
	// Epoch is the instant every run starts at.
	Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// World timing shared by every target of a run.
const (
	WorldLeaseTTL        = 30 * time.Second
	WorldHeartbeatWindow = 90 * time.Second
)
