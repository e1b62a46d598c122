package fleet

import (
	"fmt"
	"strings"
)

// ReplayCommand is the command that reruns this fault schedule: the seed
// and every setting, whatever was left at its default.
func (c Config) ReplayCommand() string {
	args := []string{"--seed", fmt.Sprint(c.Seed), "--duration", c.Duration.String(), "--agents", fmt.Sprint(c.Agents),
		"--gateways", fmt.Sprint(c.Gateways), "--rate", fmt.Sprint(c.Rate), "--fault-every", c.FaultEvery.String(),
		"--drain-bound", c.DrainBound.String(), "--ffmpeg-percent", fmt.Sprint(c.FFmpegPercent)}
	if c.Store != "" && c.Store != StoreAuto {
		args = append(args, "--store", c.Store)
	}
	if c.Postgres != "" && c.Postgres != PostgresLocal {
		args = append(args, "--postgres", c.Postgres)
	}
	if c.PGVariant != "" {
		args = append(args, "--pg-variant", c.PGVariant)
	}
	if c.AgentVariant != "" {
		args = append(args, "--agent-variant", c.AgentVariant)
	}
	return "go run -tags faultpoints,mutations ./cmd/rendermac fleet " + strings.Join(args, " ")
}
