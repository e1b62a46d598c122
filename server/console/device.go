package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
)

// deviceAttemptsShown bounds the device page's attempt list.
const deviceAttemptsShown = 50

const (
	sqlDevice = `
SELECT d.id::text, d.name, d.status, d.services, d.slots_total, d.last_seen_at, d.created_at,
       d.drain_requested_at,
       (SELECT count(*) FROM job_attempts a WHERE a.device_id = d.id AND a.ended_at IS NULL)::int
FROM devices d WHERE d.id = $1`

	sqlDeviceAttempts = `
SELECT a.id::text, a.job_id::text, a.attempt_number, a.status, a.lease_epoch, j.service,
       coalesce(a.failure_code, ''), coalesce(a.failure_message, ''), a.created_at, a.ended_at
FROM job_attempts a JOIN jobs j ON j.id = a.job_id
WHERE a.device_id = $1 ORDER BY a.created_at DESC, a.id LIMIT $2`

	sqlDeviceFailures = `
SELECT failure_code, count(*)::int FROM job_attempts
WHERE device_id = $1 AND failure_code IS NOT NULL
GROUP BY failure_code ORDER BY count(*) DESC, failure_code`

	sqlDeviceActions = `
SELECT e.id, e.action, e.actor, coalesce(o.name, ''), coalesce(e.operator_id::text, ''), e.at
FROM device_events e LEFT JOIN operators o ON o.id = e.operator_id
WHERE e.device_id = $1 ORDER BY e.id`
)

// DevicePage is one device: its row, its latest attempts, its failures by
// code and the actions operators took on it.
type DevicePage struct {
	Device
	Created      time.Time
	DrainPending bool
	Attempts     []DeviceAttempt
	Failures     []CodeCount
	Actions      []DeviceAction
	Now          time.Time
}

// DeviceAttempt is one attempt on the device page.
type DeviceAttempt struct {
	ID, JobID      string
	Number         int
	Status         string
	Epoch          int
	Service        string
	FailureCode    string
	FailureMessage string
	StartedAt      time.Time
	EndedAt        *time.Time
}

// CodeCount is a failure code and how many attempts ended with it.
type CodeCount struct {
	Code  string
	Count int
}

// DeviceAction is one row of device_events.
type DeviceAction struct {
	Seq                      int64
	Action, Actor            string
	OperatorName, OperatorID string
	At                       time.Time
}

var errNoDevice = errors.New("no such device")

func loadDevice(ctx context.Context, tx pgx.Tx, id string) (DevicePage, error) {
	var p DevicePage
	if !protocol.ValidID(id) {
		return p, errNoDevice
	}
	var drain *time.Time
	err := tx.QueryRow(ctx, sqlDevice, id).Scan(&p.ID, &p.Name, &p.Status, &p.Services, &p.SlotsTotal, &p.LastSeen,
		&p.Created, &drain, &p.Live)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, errNoDevice
	}
	if err != nil {
		return p, fmt.Errorf("read device %s: %w", id, err)
	}
	p.DrainPending = drain != nil
	rows, err := tx.Query(ctx, sqlDeviceAttempts, id, deviceAttemptsShown)
	if err == nil {
		p.Attempts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeviceAttempt, error) {
			var a DeviceAttempt
			return a, r.Scan(&a.ID, &a.JobID, &a.Number, &a.Status, &a.Epoch, &a.Service, &a.FailureCode,
				&a.FailureMessage, &a.StartedAt, &a.EndedAt)
		})
	}
	if err != nil {
		return p, fmt.Errorf("read attempts of device %s: %w", id, err)
	}
	rows, err = tx.Query(ctx, sqlDeviceFailures, id)
	if err == nil {
		p.Failures, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (CodeCount, error) {
			var c CodeCount
			return c, r.Scan(&c.Code, &c.Count)
		})
	}
	if err != nil {
		return p, fmt.Errorf("read failures of device %s: %w", id, err)
	}
	rows, err = tx.Query(ctx, sqlDeviceActions, id)
	if err == nil {
		p.Actions, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeviceAction, error) {
			var a DeviceAction
			return a, r.Scan(&a.Seq, &a.Action, &a.Actor, &a.OperatorName, &a.OperatorID, &a.At)
		})
	}
	if err != nil {
		return p, fmt.Errorf("read actions on device %s: %w", id, err)
	}
	return p, nil
}

func (c *Console) devicePage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var p DevicePage
	err := c.readTx(r.Context(), func(tx pgx.Tx) error {
		var err error
		p, err = loadDevice(r.Context(), tx, id)
		return err
	})
	switch {
	case errors.Is(err, errNoDevice):
		c.refuse(w, r, http.StatusNotFound, "no device "+id)
		return
	case err != nil:
		c.internal(w, r, err)
		return
	}
	p.Now = c.clock.Now()
	c.render(w, r, http.StatusOK, "device", view{Title: "Device " + p.Name, Nav: "devices", Flash: flash(r), Data: p})
}
