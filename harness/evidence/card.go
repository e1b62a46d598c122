package evidence

import "github.com/rendermac/rendermac/internal/provenance"

// Card is one qualification run.
type Card struct {
	// Title is the card's heading, e.g. "Phase-fault qualification".
	Title string `json:"title"`
	// Date is the run's day, YYYY-MM-DD; it names the files.
	Date string `json:"date"`
	// Passed is true when every campaign and scenario passed.
	Passed bool    `json:"passed"`
	Run    RunInfo `json:"run"`
	// Campaigns are seeded fuzz campaigns, in the order they ran.
	Campaigns []Campaign `json:"campaigns"`
	// Scenarios are named phase-fault scenarios, in catalogue order.
	Scenarios []Scenario `json:"scenarios"`
	// Contract is protocol's tables compared with the contract's text, in
	// a fixed order (empty on a card whose run did not check them).
	Contract []ContractCheck `json:"contract,omitempty"`
	// Invariants lists what was checked after every step.
	Invariants []Invariant `json:"invariants"`
	// Failures lists every failure with the command that replays it.
	Failures []Failure `json:"failures"`
	// NotCovered says what this run does not cover.
	NotCovered []string `json:"not_covered"`
	// NoTimings is set when durations were left out.
	NoTimings bool `json:"no_timings"`
	// MutationScore is the source mutation campaign, on its own card.
	MutationScore *MutationScore `json:"mutation_score,omitempty"`
	// Fleet is the fleet campaign, when qualify ran one.
	Fleet *Fleet `json:"fleet,omitempty"`
	// Linearizability is the porcupine check of the full stack's
	// concurrent histories, when qualify ran it.
	Linearizability *Linearizability `json:"linearizability,omitempty"`
	// Rules is the contract's rule inventory as this run checked it
	// (qualify's cards; nil on the others).
	Rules *Rules `json:"rules,omitempty"`
}

// RunInfo says what was run.
type RunInfo struct {
	// Build is the provenance: commit and dirty flag, Go, and the schema,
	// model and generator versions; replay refuses a card whose build
	// differs from its own. Its fields are the card's top-level run keys.
	provenance.Build
	PostgresVersion string `json:"postgres_version"`
	PostgresKind    string `json:"postgres_kind"`
	Host            string `json:"host"`
	// Command is the command line that produced the card.
	Command string `json:"command"`
	// GeneratorWeights is every generator op's weight, "create=8 lease=12 ...",
	// as --weight left them: with the seeds, what the campaigns drew.
	GeneratorWeights string `json:"generator_weights,omitempty"`
	FirstSeed        uint64 `json:"first_seed"`
	// DurationMs is the whole run's wall time (0 with NoTimings).
	DurationMs int64 `json:"duration_ms"`
	// Shard is "K/N" when the run was one shard of N (qualify --shard): its
	// campaigns and scenarios are the Kth contiguous slice. Command leaves
	// --shard out, so every shard of one run records the same command;
	// Merge checks that and joins the shards into a card without one.
	Shard string `json:"shard,omitempty"`
}

// Campaign totals one seeded campaign.
type Campaign struct {
	Name   string `json:"name"`
	Target string `json:"target"`
	// ArtifactStore is where the campaign's artifacts lived, "fs" (a
	// directory) or "s3" (a bucket of a real S3 server), for a target
	// that stores any; "" for one that does not.
	ArtifactStore string `json:"artifact_store,omitempty"`
	Seeds         int    `json:"seeds"`
	FirstSeed     uint64 `json:"first_seed"`
	StepsPerSeq   int    `json:"steps_per_sequence"`
	Sequences     int    `json:"sequences"`
	Steps         int    `json:"steps"`
	// Replies counts reply codes seen (sorted by code when written).
	Replies     map[string]int `json:"replies"`
	Divergences int            `json:"divergences"`
	Violations  int            `json:"violations"`
	Errors      int            `json:"errors"`
	Passed      bool           `json:"passed"`
	DurationMs  int64          `json:"duration_ms"`
	// TokensChecked counts the commit tokens the campaign's targets offered,
	// each checked against the contract's form (length and alphabet) and
	// for a repeat across the campaign's seeds (0: not checked).
	TokensChecked int `json:"tokens_checked,omitempty"`
	// Coverage is what the campaign reached and had to reach (nil for a
	// campaign that does not record it, such as a determinism re-run).
	Coverage *Coverage `json:"coverage,omitempty"`
}

// Scenario is one named phase-fault scenario.
type Scenario struct {
	Name     string `json:"name"`
	Fault    string `json:"fault"`
	Phase    string `json:"phase"`
	Expected string `json:"expected"`
	Observed string `json:"observed"`
	Passed   bool   `json:"passed"`
	// Timeline is what happened, lane by lane, for the HTML card.
	Timeline   []TimelineEvent `json:"timeline,omitempty"`
	DurationMs int64           `json:"duration_ms"`
	// ArtifactStore is "s3" for a run with artifacts in a bucket of a real
	// S3 server; "" is the default directory store.
	ArtifactStore string `json:"artifact_store,omitempty"`
}

// Key names the entry on a card: its Name, with "@s3" for an S3 run, so
// one card can hold a scenario run on both stores.
func (s Scenario) Key() string {
	if s.ArtifactStore == "" {
		return s.Name
	}
	return s.Name + "@" + s.ArtifactStore
}

// TimelineEvent is one entry on a scenario's timeline.
type TimelineEvent struct {
	// Lane is "agent", "gateway" or "database".
	Lane string `json:"lane"`
	// Step orders events; Label says what happened.
	Step  int    `json:"step"`
	Label string `json:"label"`
}

// Invariant is one invariant of SPEC section 4.
type Invariant struct {
	Number int    `json:"number"`
	Text   string `json:"text"`
}

// Failure is one failing campaign seed or scenario.
type Failure struct {
	// Source names the campaign or scenario.
	Source string `json:"source"`
	Seed   uint64 `json:"seed,omitempty"`
	Detail string `json:"detail"`
	// Replay is the one command that reproduces the failure.
	Replay string `json:"replay"`
	// Target, Variant and Events are the shrunk sequence, so that
	// `rendermac replay CARD.json` can run it without other files.
	// Variant's JSON key stays "mutation", its name before issue 26:
	// cards already written carry it, and a reader at an older commit
	// (ReadJSON refuses unknown fields) would reject a "variant" key.
	Target  string   `json:"target,omitempty"`
	Variant string   `json:"mutation,omitempty"`
	Events  []string `json:"events,omitempty"`
}
