package evidence

import (
	"bufio"
	"fmt"
)

// LinearizabilitySource is the failure source of the linearizability check.
const LinearizabilitySource = "linearizability"

// Linearizability is the check of the full stack's concurrent histories
// against the model with porcupine, job by job: how many rounds (seeded
// runs of concurrent clients) ran, how many job histories and operations
// were checked, the longest job history, and how long the runs and the
// checks took. Which operations interleaved how is the scheduler's, so the
// counts, like durations, are left out of a card without timings.
type Linearizability struct {
	// Rounds is the seeded runs, FirstSeed the first's seed (round i has
	// FirstSeed+i); Jobs and Clients are each round's.
	Rounds    int    `json:"rounds"`
	FirstSeed uint64 `json:"first_seed"`
	Jobs      int    `json:"jobs"`
	Clients   int    `json:"clients"`
	// Histories is the job histories checked (porcupine's partitions),
	// Operations the operations in them, Recorded all operations recorded
	// (leases that offered nothing and frames every state refuses are
	// left out of the partitions), Longest the longest job history's.
	Histories  int   `json:"histories,omitempty"`
	Operations int   `json:"operations,omitempty"`
	Recorded   int   `json:"recorded,omitempty"`
	Longest    int   `json:"longest,omitempty"`
	RunMs      int64 `json:"run_ms,omitempty"`
	CheckMs    int64 `json:"check_ms,omitempty"`
	Passed     bool  `json:"passed"`
	// Visualizations are porcupine's HTML files of the rounds that were
	// not linearizable, beside the card.
	Visualizations []string `json:"visualizations,omitempty"`
	// Command reruns all the rounds (a failure's replay, its own).
	Command string `json:"command"`
}

func mdLinearizability(w *bufio.Writer, c Card) error {
	l := c.Linearizability
	if l == nil {
		return nil
	}
	verdict := "every job history linearizable"
	if !l.Passed {
		verdict = "NOT linearizable"
	}
	fmt.Fprint(w, "\n## Linearizability\n\n")
	fmt.Fprintf(w, "The full stack's concurrent histories checked against the model with porcupine, job by job: %d rounds "+
		"(seeds %d..%d), %d jobs and %d concurrent clients each (devices' agents and adversaries on the fenced service layer, "+
		"buyers' cancels and reads through the API, a clock with sweeps): %s. Replay: %s\n\n",
		l.Rounds, l.FirstSeed, l.FirstSeed+uint64(max(l.Rounds, 1)-1), l.Jobs, l.Clients, verdict, code(l.Command))
	if !c.NoTimings {
		rows := [][]string{
			{"job histories checked", itoa(l.Histories)},
			{"operations checked (of recorded)", fmt.Sprintf("%d (of %d)", l.Operations, l.Recorded)},
			{"longest job history (operations)", itoa(l.Longest)},
			{"time: runs", ms(l.RunMs)},
			{"time: porcupine", ms(l.CheckMs)},
		}
		if err := mdTable(w, []string{"Linearizability", "Value"}, rows, 1); err != nil {
			return err
		}
	}
	for _, v := range l.Visualizations {
		fmt.Fprintf(w, "\nVisualization: %s\n", code(v))
	}
	return nil
}

// mergeLinearizability joins the shards' sections: each shard ran its
// slice of the rounds.
func mergeLinearizability(shards []ShardCard) *Linearizability {
	var out *Linearizability
	for _, s := range shards {
		l := s.Card.Linearizability
		if l == nil || l.Rounds == 0 {
			continue // a shard that held none of the rounds
		}
		if out == nil {
			c := *l
			c.Visualizations = append([]string(nil), l.Visualizations...)
			out = &c
			continue
		}
		out.Rounds += l.Rounds
		out.FirstSeed = min(out.FirstSeed, l.FirstSeed)
		out.Histories += l.Histories
		out.Operations += l.Operations
		out.Recorded += l.Recorded
		out.Longest = max(out.Longest, l.Longest)
		out.RunMs += l.RunMs
		out.CheckMs += l.CheckMs
		out.Passed = out.Passed && l.Passed
		out.Visualizations = append(out.Visualizations, l.Visualizations...)
	}
	return out
}
