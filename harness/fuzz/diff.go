package fuzz

import (
	"fmt"
	"reflect"

	"github.com/rendermac/rendermac/protocol"
)

// DiffSnapshots describes the first difference between two projected
// states, or returns "" when they are equal. Times compare in UTC at
// microsecond precision, which is what Postgres keeps.
func DiffSnapshots(a, b protocol.Snapshot) string {
	a, b = normalSnapshot(a), normalSnapshot(b)
	if d := diffRows("job", a.Jobs, b.Jobs); d != "" {
		return d
	}
	if d := diffRows("attempt", a.Attempts, b.Attempts); d != "" {
		return d
	}
	if d := diffRows("buyer", a.Buyers, b.Buyers); d != "" {
		return d
	}
	if d := diffRows("device", a.Devices, b.Devices); d != "" {
		return d
	}
	return diffRows("journal row", a.Journal, b.Journal)
}

func diffRows[T any](what string, a, b []T) string {
	for i := 0; i < min(len(a), len(b)); i++ {
		if !reflect.DeepEqual(a[i], b[i]) {
			return fmt.Sprintf("%s %d: %+v != %+v", what, i, a[i], b[i])
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d %s rows != %d", len(a), what, len(b))
	}
	return ""
}

func normalSnapshot(s protocol.Snapshot) protocol.Snapshot {
	out := protocol.Snapshot{
		Jobs:     append([]protocol.JobRow(nil), s.Jobs...),
		Attempts: append([]protocol.AttemptRow(nil), s.Attempts...),
		Buyers:   append([]protocol.BuyerRow(nil), s.Buyers...),
		Devices:  append([]protocol.DeviceRow(nil), s.Devices...),
		Journal:  append([]protocol.EventRow(nil), s.Journal...),
	}
	for i := range out.Jobs {
		out.Jobs[i].CreatedAt = normalTime(out.Jobs[i].CreatedAt)
		out.Jobs[i].AdmissionDeadline = normalTime(out.Jobs[i].AdmissionDeadline)
	}
	for i := range out.Attempts {
		out.Attempts[i].LeaseExpiresAt = normalTime(out.Attempts[i].LeaseExpiresAt)
	}
	for i := range out.Devices {
		out.Devices[i].LastSeenAt = normalTime(out.Devices[i].LastSeenAt)
	}
	for i := range out.Journal {
		out.Journal[i].At = normalTime(out.Journal[i].At)
	}
	return out
}
