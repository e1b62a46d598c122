package evidence

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/rendermac/rendermac/internal/shard"
)

// ShardCard is one shard's card and the name (its path) that Merge's
// errors call it by.
type ShardCard struct {
	Name string
	Card Card
}

// Merge joins the cards of one sharded run (qualify --shard 1/N ... N/N,
// given in any order) into the card one unsharded run of the same command
// writes. Shards are contiguous slices (package shard), so concatenating
// them in K order restores the unsharded order.
//
// Every field of Card is either combined or must be the same in every
// shard; Merge refuses, naming the cards and the field, shards that do not
// belong to one run. Combined:
//   - Date: the earliest shard's (the run started then);
//   - Passed: every shard passed and no failure is listed;
//   - Run.Shard: dropped (the merged card is the whole run);
//   - Run.Host: the distinct hosts, in shard order, joined by ", ";
//   - Run.PostgresVersion and PostgresKind: the one value of the shards
//     that used Postgres (a shard whose slices needed none records none);
//   - Run.DurationMs and every campaign and scenario duration: summed, the
//     time one machine would have spent;
//   - campaigns (same names, targets and steps per sequence in every
//     shard, and each shard's first seed where the previous shard's slice
//     ended): seeds, sequences, steps, reply counts, divergences,
//     violations, errors and tokens checked summed (each shard checked its
//     slice's tokens for repeats, not across slices), the verdict PASS only if every shard's;
//     coverage counts summed (Coverage.Add) against the same required
//     cells, tables and gate, and the coverage gate, which shards defer,
//     applied to the sums;
//   - scenarios: concatenated; not-covered notes: every distinct note, in
//     shard order (the shared notes first, then each shard's skipped
//     scenarios);
//   - rules: the same rows, checks and proofs in every shard (checked
//     equal), a check counted as run when any shard ran it (a shard runs
//     its slice of the scenarios), the counts recomputed;
//   - failures: each campaign's in campaign order, shard after shard
//     (seed order), then the scenarios'. Each shard shrank its own first
//     failing seed of a campaign, so a failing merged card can hold up to
//     N shrunk sequences for a campaign where one unsharded run holds one.
//
// Equal in every shard: Title, Contract (every shard checks the same
// tables; their failures are taken from the first shard only), Invariants, NoTimings, the provenance
// (commit, dirty flag, Go, schema, model and generator versions), the
// command (qualify records it without --shard), generator weights and
// first seed; a card with
// a mutation score is not a shard.
func Merge(shards []ShardCard) (Card, error) {
	ordered, err := inShardOrder(shards)
	if err != nil {
		return Card{}, err
	}
	first := ordered[0]
	for _, s := range ordered[1:] {
		if err := sameRun(first, s); err != nil {
			return Card{}, err
		}
	}
	out := first.Card
	out.Run.Shard, out.Run.DurationMs, out.Passed = "", 0, true
	out.Invariants = slices.Clone(out.Invariants)
	out.Scenarios, out.NotCovered = nil, nil
	var hosts []string
	scenarioFrom := map[string]string{}
	for _, s := range ordered {
		c := s.Card
		out.Date = min(out.Date, c.Date)
		out.Passed = out.Passed && c.Passed
		out.Run.DurationMs += c.Run.DurationMs
		if out.Run.PostgresVersion == "" {
			out.Run.PostgresVersion, out.Run.PostgresKind = c.Run.PostgresVersion, c.Run.PostgresKind
		}
		hosts = appendNew(hosts, c.Run.Host)
		for _, sc := range c.Scenarios {
			if other, dup := scenarioFrom[sc.Key()]; dup {
				return Card{}, fmt.Errorf("merge: scenario %s is in both %s and %s: shards must be disjoint", sc.Key(), other, s.Name)
			}
			scenarioFrom[sc.Key()] = s.Name
			out.Scenarios = append(out.Scenarios, sc)
		}
		for _, note := range c.NotCovered {
			out.NotCovered = appendNew(out.NotCovered, note)
		}
	}
	out.Run.Host = strings.Join(hosts, ", ")
	if out.Campaigns, err = mergeCampaigns(ordered); err != nil {
		return Card{}, err
	}
	if out.Rules, err = mergeRuleSections(ordered); err != nil {
		return Card{}, err
	}
	out.Linearizability = mergeLinearizability(ordered)
	out.Failures = mergeFailures(ordered, out.Campaigns)
	out.Passed = out.Passed && len(out.Failures) == 0
	out = normalize(out)
	if err := out.Validate(); err != nil {
		return Card{}, fmt.Errorf("merge: %w", err)
	}
	return out, nil
}

// inShardOrder checks that shards are exactly 1/N ... N/N of one N and
// returns them sorted by K.
func inShardOrder(shards []ShardCard) ([]ShardCard, error) {
	if len(shards) == 0 {
		return nil, errors.New("merge: no shard cards given")
	}
	n, nFrom := 0, ""
	byK := map[int]ShardCard{}
	for _, s := range shards {
		if s.Card.MutationScore != nil {
			return nil, fmt.Errorf("merge: %s is a mutation-score card, not a qualification shard", s.Name)
		}
		if s.Card.Fleet != nil {
			return nil, fmt.Errorf("merge: %s has a fleet section, which qualify --shard never runs", s.Name)
		}
		if s.Card.Run.Shard == "" {
			return nil, fmt.Errorf("merge: %s is not a shard card: it records no shard (qualify --shard K/N writes one)", s.Name)
		}
		sp, err := shard.Parse(s.Card.Run.Shard)
		if err != nil {
			return nil, fmt.Errorf("merge: %s: %w", s.Name, err)
		}
		if n == 0 {
			n, nFrom = sp.N, s.Name
		} else if sp.N != n {
			return nil, fmt.Errorf("merge: %s is shard %s but %s is one of %d shards: not one run", s.Name, sp, nFrom, n)
		}
		if prev, dup := byK[sp.K]; dup {
			return nil, fmt.Errorf("merge: shard %s given twice: %s and %s", sp, prev.Name, s.Name)
		}
		byK[sp.K] = s
	}
	var missing []string
	for k := 1; k <= n; k++ {
		if _, ok := byK[k]; !ok {
			missing = append(missing, shard.Spec{K: k, N: n}.String())
		}
	}
	if len(missing) > 0 {
		if len(missing) > 10 {
			missing = append(missing[:10], fmt.Sprintf("and %d more", len(missing)-10))
		}
		return nil, fmt.Errorf("merge: missing shard %s (given %d of %d)", strings.Join(missing, ", "), len(byK), n)
	}
	out := make([]ShardCard, 0, n)
	for k := 1; k <= n; k++ {
		out = append(out, byK[k])
	}
	return out, nil
}

// sameField is one value two shards of one run must agree on.
type sameField struct {
	what string
	x, y any
}

// sameRun refuses b unless it records the same run as a.
func sameRun(a, b ShardCard) error {
	ar, br := a.Card.Run, b.Card.Run
	same := []sameField{
		{"title", a.Card.Title, b.Card.Title},
		{"commit", ar.Commit, br.Commit},
		{"dirty flag", ar.Dirty, br.Dirty},
		{"Go version", ar.GoVersion, br.GoVersion},
		{"schema version", ar.SchemaVersion, br.SchemaVersion},
		{"model version", ar.ModelVersion, br.ModelVersion},
		{"generator version", ar.GeneratorVersion, br.GeneratorVersion},
		{"command (flags other than --shard)", ar.Command, br.Command},
		{"first seed", ar.FirstSeed, br.FirstSeed},
		{"generator weights", ar.GeneratorWeights, br.GeneratorWeights},
		{"no_timings", a.Card.NoTimings, b.Card.NoTimings},
	}
	// A shard whose slices needed no Postgres records none.
	if ar.PostgresVersion != "" && br.PostgresVersion != "" {
		same = append(same, sameField{"Postgres version", ar.PostgresVersion, br.PostgresVersion})
	}
	if ar.PostgresKind != "" && br.PostgresKind != "" {
		same = append(same, sameField{"Postgres kind", ar.PostgresKind, br.PostgresKind})
	}
	for _, f := range same {
		if f.x != f.y {
			return fmt.Errorf("merge: %s and %s are not shards of one run: %s differs (%v, %v)", a.Name, b.Name, f.what, f.x, f.y)
		}
	}
	if !slices.Equal(a.Card.Contract, b.Card.Contract) {
		return fmt.Errorf("merge: %s and %s are not shards of one run: their contract checks differ", a.Name, b.Name)
	}
	if !slices.Equal(a.Card.Invariants, b.Card.Invariants) {
		return fmt.Errorf("merge: %s and %s are not shards of one run: they checked different invariants", a.Name, b.Name)
	}
	return nil
}

// mergeCampaigns sums the shards' rows of each campaign.
func mergeCampaigns(shards []ShardCard) ([]Campaign, error) {
	first := shards[0]
	out := make([]Campaign, len(first.Card.Campaigns))
	for i, cp := range first.Card.Campaigns {
		cp.Replies = addCounts(nil, cp.Replies)
		if cp.Coverage != nil {
			cov := Coverage{Required: cp.Coverage.Required, Tables: cp.Coverage.Tables, Gate: cp.Coverage.Gate}
			cov.Add(*cp.Coverage)
			cp.Coverage = &cov
		}
		out[i] = cp
	}
	for _, s := range shards[1:] {
		if len(s.Card.Campaigns) != len(out) {
			return nil, fmt.Errorf("merge: %s has %d campaigns, %s has %d: not shards of one run",
				first.Name, len(out), s.Name, len(s.Card.Campaigns))
		}
		for i, cp := range s.Card.Campaigns {
			m := &out[i]
			switch {
			case cp.Name != m.Name || cp.Target != m.Target || cp.ArtifactStore != m.ArtifactStore || cp.StepsPerSeq != m.StepsPerSeq:
				return nil, fmt.Errorf("merge: campaign %d is %s (target %s, %d steps/sequence) in %s but %s (target %s, %d steps/sequence) in %s",
					i+1, m.Name, m.Target, m.StepsPerSeq, first.Name, cp.Name, cp.Target, cp.StepsPerSeq, s.Name)
			case cp.FirstSeed != m.FirstSeed+uint64(m.Seeds):
				return nil, fmt.Errorf("merge: campaign %s in %s starts at seed %d, not where the previous shards' slices end (%d)",
					cp.Name, s.Name, cp.FirstSeed, m.FirstSeed+uint64(m.Seeds))
			case !sameCoverageRules(m.Coverage, cp.Coverage):
				return nil, fmt.Errorf("merge: campaign %s: %s and %s record coverage against different required cells, tables or gate",
					cp.Name, first.Name, s.Name)
			}
			if cp.Coverage != nil {
				m.Coverage.Add(*cp.Coverage)
			}
			m.Seeds += cp.Seeds
			m.Sequences += cp.Sequences
			m.Steps += cp.Steps
			m.TokensChecked += cp.TokensChecked
			m.Replies = addCounts(m.Replies, cp.Replies)
			m.Divergences += cp.Divergences
			m.Violations += cp.Violations
			m.Errors += cp.Errors
			m.Passed = m.Passed && cp.Passed
			m.DurationMs += cp.DurationMs
		}
	}
	// The coverage gate, which shards leave to the merge, on the sums.
	for i := range out {
		if cov := out[i].Coverage; cov != nil && cov.Gate && len(cov.Unreached()) > 0 {
			out[i].Passed = false
		}
	}
	return out, nil
}

// sameCoverageRules: both campaigns record no coverage, or both record it
// against the same required cells, tables and gate.
func sameCoverageRules(a, b *Coverage) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Gate == b.Gate && reflect.DeepEqual(a.Required, b.Required) && reflect.DeepEqual(a.Tables, b.Tables)
}

// mergeFailures orders the failures as one run lists them: campaign by
// campaign (each shard's slice of seeds after the previous, then the
// coverage gate's failure of the summed coverage), then the rest
// (scenarios, in catalogue order because shards are contiguous). A shard's
// own coverage failure, if it has one, is replaced by the summed one.
func mergeFailures(shards []ShardCard, campaigns []Campaign) []Failure {
	var out []Failure
	taken := make([][]bool, len(shards))
	for k, s := range shards {
		taken[k] = make([]bool, len(s.Card.Failures))
	}
	for _, cp := range campaigns {
		for k, s := range shards {
			for j, f := range s.Card.Failures {
				switch {
				case taken[k][j]:
				case f.Source == cp.Name:
					out, taken[k][j] = append(out, f), true
				case f.Source == CoverageSource(cp.Name):
					taken[k][j] = true
				}
			}
		}
		if cp.Coverage != nil && cp.Coverage.Gate {
			if fl, missed := CoverageFailure(cp.Name, *cp.Coverage); missed {
				out = append(out, fl)
			}
		}
	}
	for k, s := range shards {
		for j, f := range s.Card.Failures {
			// Every shard checks the contract; one run lists its failures once.
			if !taken[k][j] && (k == 0 || f.Source != ContractSource) {
				out = append(out, f)
			}
		}
	}
	return out
}

// addCounts adds src's counts into dst (allocated when nil) and returns it;
// every count map on a card merges this way.
func addCounts[K comparable, V int | int64](dst, src map[K]V) map[K]V {
	if dst == nil {
		dst = make(map[K]V, len(src))
	}
	for k, n := range src {
		dst[k] += n
	}
	return dst
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// mergeRuleSections joins the shards' rule sections: every shard lists the same
// rules with the same checks, mutants and proofs; a check ran in the
// merged run when it ran in any shard.
func mergeRuleSections(ordered []ShardCard) (*Rules, error) {
	first := ordered[0]
	if first.Card.Rules == nil {
		for _, s := range ordered[1:] {
			if s.Card.Rules != nil {
				return nil, fmt.Errorf("merge: %s has a rules section and %s has none: not one run", s.Name, first.Name)
			}
		}
		return nil, nil
	}
	out := *first.Card.Rules
	out.Rows = make([]RuleRow, len(first.Card.Rules.Rows))
	for i, row := range first.Card.Rules.Rows {
		row.Checks = slices.Clone(row.Checks)
		row.Mutants = slices.Clone(row.Mutants)
		out.Rows[i] = row
	}
	for _, s := range ordered[1:] {
		r := s.Card.Rules
		if r == nil || r.MutationCard != out.MutationCard || len(r.Rows) != len(out.Rows) {
			return nil, fmt.Errorf("merge: %s and %s are not shards of one run: their rule inventories differ", first.Name, s.Name)
		}
		for i, row := range r.Rows {
			m := &out.Rows[i]
			if row.ID != m.ID || row.Source != m.Source || row.Text != m.Text || row.Proven != m.Proven ||
				row.NotCheckable != m.NotCheckable || !slices.Equal(row.Mutants, m.Mutants) || len(row.Checks) != len(m.Checks) {
				return nil, fmt.Errorf("merge: %s and %s are not shards of one run: rule %s differs", first.Name, s.Name, m.ID)
			}
			for j, ck := range row.Checks {
				if ck.Name != m.Checks[j].Name {
					return nil, fmt.Errorf("merge: %s and %s are not shards of one run: rule %s's checks differ", first.Name, s.Name, m.ID)
				}
				if ck.Ran {
					m.Checks[j].Ran, m.Checks[j].Why = true, ""
				}
			}
		}
	}
	out.Count()
	return &out, nil
}
