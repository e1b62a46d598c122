package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// cpuSample is CPU time spent so far (readCPU).
type cpuSample struct{ postgres, self, server time.Duration }

// PeakCPU is the CPU time the peak phase cost per committed job: the
// figure that depends least on how fast the machine happens to be.
type PeakCPU struct {
	// PostgresMS is the postmaster's and its backends', those that exited
	// during the phase included.
	PostgresMS float64 `json:"postgres_ms_per_job"`
	// ProcessMS is this process: the load generator, and in one-process
	// mode the control plane too.
	ProcessMS float64 `json:"this_process_ms_per_job"`
	// ServerMS is the two-process server's (0 in one-process mode).
	ServerMS float64 `json:"server_ms_per_job,omitempty"`
	// ServerElsewhere says the control plane ran in a server this process
	// did not start (--client-only): ProcessMS is the load generator alone,
	// and the server's CPU is not in the figure.
	ServerElsewhere bool `json:"server_not_measured,omitempty"`
	// Busy is how many cores those processes kept busy over the phase.
	Busy  float64 `json:"cores_busy"`
	Error string  `json:"error,omitempty"`
}

// cpuMeter measures a phase's CPU per job.
type cpuMeter struct {
	postmaster, server int
	// serverElsewhere: the control plane is a server not started here
	// (PeakCPU.ServerElsewhere).
	serverElsewhere bool
	at              time.Time
	start           cpuSample
	err             error
}

// startCPU finds the postmaster through one of pool's backends (it must
// run on this machine) and takes the first sample.
func startCPU(ctx context.Context, pool *pgxpool.Pool, server int) *cpuMeter {
	m := &cpuMeter{server: server}
	var backend int
	if m.err = pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); m.err != nil {
		return m
	}
	if m.postmaster, m.err = parentOf(backend); m.err != nil {
		m.err = fmt.Errorf("Postgres backend %d is not a process of this machine: %w", backend, m.err)
		return m
	}
	m.at = time.Now()
	m.start, m.err = readCPU(m.postmaster, m.server)
	return m
}

// since returns the CPU spent since the start and the wall time since.
func (m *cpuMeter) since() (cpuSample, time.Duration, error) {
	if m.err != nil {
		return cpuSample{}, 0, m.err
	}
	end, err := readCPU(m.postmaster, m.server)
	if err != nil {
		return cpuSample{}, 0, err
	}
	return cpuSample{postgres: end.postgres - m.start.postgres, self: end.self - m.start.self,
		server: end.server - m.start.server}, time.Since(m.at), nil
}

// per returns the CPU spent since the start, per job.
func (m *cpuMeter) per(jobs int) *PeakCPU {
	d, window, err := m.since()
	if err == nil && jobs <= 0 {
		err = errors.New("no jobs")
	}
	if err != nil {
		return &PeakCPU{Error: err.Error(), ServerElsewhere: m.serverElsewhere}
	}
	n := float64(jobs)
	return &PeakCPU{PostgresMS: ms(d.postgres) / n, ProcessMS: ms(d.self) / n, ServerMS: ms(d.server) / n,
		Busy: float64(d.postgres+d.self+d.server) / float64(window), ServerElsewhere: m.serverElsewhere}
}

// PgbenchCPU is a pgbench run's CPU time per transaction, the reference's
// counterpart of PeakCPU.
type PgbenchCPU struct {
	PostgresMS float64 `json:"postgres_ms_per_tx"`
	PgbenchMS  float64 `json:"pgbench_ms_per_tx"`
	Busy       float64 `json:"cores_busy"`
	Error      string  `json:"error,omitempty"`
}

// TotalMS is the transaction's CPU time, both sides.
func (c *PgbenchCPU) TotalMS() float64 { return c.PostgresMS + c.PgbenchMS }
