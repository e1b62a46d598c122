package scenarios

import (
	"errors"
	"fmt"
	"strings"
)

// Pausing a service (SPEC section 3, "Pausing a service"): the pause and
// resume themselves go through `request POST /v1/admin/services/NAME/...`;
// this command checks their audit rows.

func init() {
	scCommands["pauses"] = cmdPauses
}

// cmdPauses checks a service's audit rows (service_pause_events) in order:
// each `ACTION:OPERATOR` (pause or resume, and the operator's scenario
// name), actor `operator` on every row; `-> none` for no row.
//
// Example: pauses synthetic.mp4 -> pause:o1 resume:o2
func cmdPauses(r *scRun, st scStep) error {
	service := arg(st, 0)
	if service == "" || len(st.arrow) == 0 {
		return errors.New("want: pauses SERVICE -> ACTION:OPERATOR ... | none")
	}
	names := map[string]string{}
	for name, op := range r.opsState().operators {
		names[op.id] = name
	}
	rows, err := r.observer.Query(r.ctx, `SELECT action, actor, operator_id::text FROM service_pause_events
WHERE service = $1 ORDER BY seq`, service)
	if err != nil {
		return fmt.Errorf("pauses %s: %w", service, err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var action, actor, id string
		if err := rows.Scan(&action, &actor, &id); err != nil {
			return err
		}
		if actor != "operator" {
			return fmt.Errorf("pauses %s: a %s row with actor %q, want operator", service, action, actor)
		}
		who := names[id]
		if who == "" {
			who = "unknown(" + id + ")"
		}
		got = append(got, action+":"+who)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	want := strings.Join(st.arrow, " ")
	if want == "none" {
		want = ""
	}
	if g := strings.Join(got, " "); g != want {
		return fmt.Errorf("pauses %s: rows %q, want %q", service, g, want)
	}
	r.tl.add(laneDatabase, fmt.Sprintf("service %s: %d pause/resume audit rows, actor operator", service, len(got)))
	return nil
}
