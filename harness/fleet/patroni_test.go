package fleet

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestPostgresChoiceRefusesUnknownAndMismatched: an unknown database or
// variant, and a cluster variant without the cluster, are refused with
// what is wrong.
func TestPostgresChoiceRefusesUnknownAndMismatched(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Postgres: "mysql"}, `postgres "mysql"`},
		{Config{Postgres: PostgresPatroni, PGVariant: "lossy"}, `postgres variant "lossy"`},
		{Config{Postgres: PostgresLocal, PGVariant: PGVariantAsyncHoldback}, "needs the Patroni cluster"},
	} {
		err := c.cfg.checkPostgres()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error holding %q", c.cfg, err, c.want)
		}
	}
	for _, ok := range []Config{{Postgres: PostgresLocal}, {Postgres: PostgresPatroni}, {Postgres: PostgresPatroni, PGVariant: PGVariantAsyncHoldback}} {
		if err := ok.checkPostgres(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// TestAsyncHoldbackLosesAcknowledgedWork is the check's teeth: on an
// asynchronous cluster whose standbys' WAL is held back before the
// primary is killed, the promoted standby lacks commits the control plane
// acknowledged, and the run fails naming them (a commit_ok for an attempt
// that is not the job's success, a 201 for a job that is gone, or a
// webhook for an outcome the database no longer holds).
func TestAsyncHoldbackLosesAcknowledgedWork(t *testing.T) {
	bin, log, ctx := realProcesses(t, "starts a Patroni cluster, two servers and two agents")
	rep, err := Run(ctx, Config{Bin: bin, Duration: 10 * time.Second, Seed: 3, Agents: 2, Gateways: 2, Rate: 4,
		FaultEvery: 500 * time.Millisecond, FFmpegPercent: 0, DrainBound: 4 * time.Minute, Log: log,
		Postgres: PostgresPatroni, PGVariant: PGVariantAsyncHoldback})
	if err != nil {
		t.Fatalf("fleet run: %v\n%s", err, log.String())
	}
	var table bytes.Buffer
	if err := rep.PrintTable(&table); err != nil {
		t.Fatal(err)
	}
	if rep.Faults[FaultPrimaryKill] == 0 || len(rep.PrimaryLosses) == 0 || !rep.PrimaryLosses[0].Visible {
		t.Fatalf("no primary was killed with a success visible during the hold-back:\n%s\n%s", table.String(), log.String())
	}
	lost := 0
	for _, c := range rep.AllChecks() {
		switch c.ID {
		case "commit-ok-live", "accepted-terminal", "webhook-terminal", "webhooks":
			lost += len(c.Violations)
		}
	}
	if lost == 0 {
		t.Fatalf("the asynchronous cluster lost nothing the checks saw; replay: go run -tags faultpoints,mutations ./cmd/rendermac "+
			"fleet --seed 3 --duration 10s --agents 2 --rate 4 --fault-every 500ms --ffmpeg-percent 0 --drain-bound 4m "+
			"--postgres patroni --pg-variant async_holdback\n%s", table.String())
	}
	t.Logf("%d lost acknowledgements named:\n%s", lost, table.String())
}
