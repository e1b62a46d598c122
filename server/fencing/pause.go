package fencing

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/store"
)

// Operation names of pausing and resuming a service.
const (
	OpPauseService  = "pause_service"
	OpResumeService = "resume_service"
)

// Pausing and resuming are one statement each, so one transaction: the
// state row and its audit row are written together or not at all, and a
// repeat (ON CONFLICT DO NOTHING, a DELETE of nothing) writes neither. The
// count is the audit rows written: 1 when the state changed. Resume's
// NOTIFY on JobsChannel (payload the service) is sent from the same
// statement, so the gateways hear it only once the resume has committed,
// and wake the idle sessions that offer the service: a queued job of a
// resumed service is leasable at once, not at the next poll.
const (
	sqlPauseService = `
WITH p AS (
    INSERT INTO paused_services (service, paused_at, operator_id)
    VALUES ($1, coalesce($2::timestamptz, now()), $3)
    ON CONFLICT (service) DO NOTHING
    RETURNING service, paused_at, operator_id),
a AS (
    INSERT INTO service_pause_events (service, action, actor, operator_id, at)
    SELECT service, 'pause', 'operator', operator_id, paused_at FROM p
    RETURNING 1)
SELECT count(*) FROM a`

	sqlResumeService = `
WITH d AS (
    DELETE FROM paused_services WHERE service = $1 RETURNING service),
a AS (
    INSERT INTO service_pause_events (service, action, actor, operator_id, at)
    SELECT service, 'resume', 'operator', $3, coalesce($2::timestamptz, now()) FROM d
    RETURNING service)
SELECT count(*) FROM (SELECT pg_notify('` + JobsChannel + `', service) FROM a) n`

	sqlPausedServices = `SELECT service FROM paused_services ORDER BY service`
)

// PauseService stops the matcher offering jobs of service (SPEC section 3,
// "Pausing a service"): paused when it was offered, already_paused when it
// was paused (nothing written), not_found for a service the catalogue
// lacks. Queued jobs of a paused service stay queued, and the sweeper still
// fails them at their admission deadline; live attempts go on. operatorID
// is who paused it, recorded in the audit row.
func (s *Service) PauseService(ctx context.Context, now time.Time, operatorID, service string) (protocol.Reply, error) {
	return s.setPaused(ctx, now, operatorID, service, true)
}

// ResumeService offers the jobs of a paused service again: resumed, or
// not_paused when it was not paused (nothing written), or not_found.
func (s *Service) ResumeService(ctx context.Context, now time.Time, operatorID, service string) (protocol.Reply, error) {
	return s.setPaused(ctx, now, operatorID, service, false)
}

func (s *Service) setPaused(ctx context.Context, now time.Time, operatorID, service string, pause bool) (protocol.Reply, error) {
	op, sql, changed, same := OpResumeService, sqlResumeService, protocol.CodeResumed, protocol.CodeNotPaused
	if pause {
		op, sql, changed, same = OpPauseService, sqlPauseService, protocol.CodePaused, protocol.CodeAlreadyPaused
	}
	if _, ok := s.service(service); !ok {
		return protocol.Reply{Code: protocol.CodeNotFound, Message: fmt.Sprintf("unknown service %q", service)}, nil
	}
	if !protocol.ValidID(operatorID) {
		return protocol.Reply{}, fmt.Errorf("%s %s: operator id %q is not a lowercase uuid", op, service, operatorID)
	}
	ctx = dbstat.WithOp(ctx, op)
	var n int
	err := s.retrying(ctx, op, func() error {
		return s.pool.QueryRow(ctx, sql, service, store.NowArg(now), operatorID).Scan(&n)
	})
	if err != nil {
		return protocol.Reply{}, fmt.Errorf("%s %s: %w", op, service, err)
	}
	if n == 0 {
		return protocol.Reply{Code: same}, nil
	}
	return protocol.Reply{Code: changed}, nil
}

// Services is the catalogue the service layer sells (Config.Services).
func (s *Service) Services() []protocol.Service { return s.cfg.Services }

// PausedServices lists the paused services by name.
func (s *Service) PausedServices(ctx context.Context) ([]string, error) {
	return PausedServices(ctx, s.pool)
}

// PausedServices lists the paused services by name, for readers without a
// Service (the console, the API's listing).
func PausedServices(ctx context.Context, q store.Querier) ([]string, error) {
	rows, err := q.Query(ctx, sqlPausedServices)
	if err != nil {
		return nil, fmt.Errorf("list paused services: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
