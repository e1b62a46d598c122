package evidence

import (
	"bufio"
	"fmt"
	"time"
)

// Fleet is the fleet campaign's summary (`rendermac fleet`: server and
// agent processes under Mac sleep, Wi-Fi loss, full disks, gateway and
// Postgres kills), on the card when qualify ran one.
type Fleet struct {
	// Command replays the campaign (seed and every setting).
	Command  string `json:"command"`
	Agents   int    `json:"agents"`
	Gateways int    `json:"gateways"`
	// Store is the gateways' shared artifact store ("s3", "fs").
	Store string `json:"store,omitempty"`
	// Transport says how the agents reached the gateways (TLS, the CA
	// given to them with --ca-file).
	Transport string `json:"transport,omitempty"`
	// LoadMs is how long load and faults ran (0 with NoTimings).
	LoadMs int64 `json:"load_ms"`
	// Faults counts the faults injected, by kind; Jobs the jobs by outcome.
	Faults []Count `json:"faults"`
	Jobs   []Count `json:"jobs"`
	// WastedMs is the agents' work after their lease was lost, summed;
	// DrainMs how long the queue took to drain after the last heal, against
	// DrainBoundMs (timings; 0 with NoTimings).
	WastedMs     int64 `json:"wasted_ms"`
	DrainMs      int64 `json:"drain_ms"`
	DrainBoundMs int64 `json:"drain_bound_ms"`
	// Postgres says which database the gateways had (one local cluster,
	// or the Patroni cluster); PrimaryLosses are the primaries the
	// campaign killed or switched over, each with its failover outage.
	Postgres      string        `json:"postgres,omitempty"`
	PrimaryLosses []PrimaryLoss `json:"primary_losses,omitempty"`
	// Violations are what the checks found (empty: passed).
	Violations []string `json:"violations"`
	// Checks are the IDs of the checks the run made (fleet.CheckIDs), as
	// the rule trace names them (fleet:ID).
	Checks []string `json:"checks,omitempty"`
}

// PrimaryLoss is one primary the fleet campaign took away, and the time
// from then to the first job committed after it (OutageMs, a timing: 0
// with NoTimings; -1 when no job committed after it).
type PrimaryLoss struct {
	Kind     string `json:"kind"`
	From     string `json:"from"`
	To       string `json:"to"`
	OutageMs int64  `json:"outage_ms"`
}

// Count is a named count.
type Count struct {
	Name string `json:"name"`
	N    int    `json:"n"`
	// Note says why a count is 0 by design (a fault the run could not
	// inject); empty otherwise.
	Note string `json:"note,omitempty"`
}

func mdFleet(w *bufio.Writer, c Card) error {
	f := c.Fleet
	if f == nil {
		return nil
	}
	fmt.Fprint(w, "\n## Fleet\n\n")
	store := ""
	if f.Store != "" {
		store = " sharing the " + f.Store + " artifact store"
	}
	fmt.Fprintf(w, "%d `rendermac agent` processes, %d `rendermac server` processes%s; replay: %s\n\n", f.Agents, f.Gateways, store, code(f.Command))
	if f.Transport != "" {
		fmt.Fprintf(w, "Transport: %s.\n\n", f.Transport)
	}
	var rows [][]string
	for _, k := range f.Faults {
		n := itoa(k.N)
		if k.Note != "" {
			n += " (" + k.Note + ")"
		}
		rows = append(rows, []string{k.Name, n})
	}
	if err := mdTable(w, []string{"Fault", "Injected"}, rows, 1); err != nil {
		return err
	}
	rows = nil
	for _, k := range f.Jobs {
		rows = append(rows, []string{k.Name, itoa(k.N)})
	}
	fmt.Fprint(w, "\n")
	if err := mdTable(w, []string{"Jobs", "Count"}, rows, 1); err != nil {
		return err
	}
	if !c.NoTimings {
		fmt.Fprintf(w, "\nLoad %s; wasted work (agents rendering after their lease was lost) %s; queue drained %s after the last heal (bound %s).\n",
			ms(f.LoadMs), ms(f.WastedMs), ms(f.DrainMs), ms(f.DrainBoundMs))
	}
	if f.Postgres != "" {
		fmt.Fprintf(w, "\nPostgres: %s.\n", f.Postgres)
	}
	if len(f.PrimaryLosses) > 0 {
		rows = nil
		for _, l := range f.PrimaryLosses {
			out := ms(l.OutageMs)
			switch {
			case c.NoTimings:
				out = "(timings off)"
			case l.OutageMs < 0:
				out = "no job committed after it"
			}
			rows = append(rows, []string{l.Kind, l.From + " -> " + l.To, out})
		}
		fmt.Fprint(w, "\n")
		if err := mdTable(w, []string{"Primary loss", "From -> to", "Failover outage (to the first committed job)"}, rows, 0); err != nil {
			return err
		}
	}
	if len(f.Violations) == 0 {
		fmt.Fprint(w, "\nViolations: none.\n")
	}
	for _, v := range f.Violations {
		fmt.Fprintf(w, "\n- VIOLATION %s", oneLine(v))
	}
	if len(f.Violations) > 0 {
		fmt.Fprint(w, "\n")
	}
	return nil
}

func ms(n int64) string { return (time.Duration(n) * time.Millisecond).String() }
