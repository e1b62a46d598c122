package mutate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The catalogue fits the tree it ships in: every snippet occurs exactly
// once, ids are unique, and there are at least 25 mutants.
func TestCatalogueFitsTheTree(t *testing.T) {
	require.GreaterOrEqual(t, len(Catalogue), 25)
	require.NoError(t, Check("../..", Catalogue))
}

// Apply changes exactly the snippet and restore undoes it; a snippet that
// no longer matches exactly once is refused with the mutant's name.
func TestApplyAndRestore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.go")
	require.NoError(t, os.WriteFile(path, []byte("x := a < b\ny := c\n"), 0o644))
	restore, err := Apply(dir, Mutant{ID: "lt", File: "a.go", Old: "a < b", New: "a <= b"})
	require.NoError(t, err)
	b, _ := os.ReadFile(path)
	require.Equal(t, "x := a <= b\ny := c\n", string(b))
	require.NoError(t, restore())
	b, _ = os.ReadFile(path)
	require.Equal(t, "x := a < b\ny := c\n", string(b))

	_, err = Apply(dir, Mutant{ID: "gone", File: "a.go", Old: "a > b", New: "x"})
	require.ErrorContains(t, err, "mutant gone: snippet \"a > b\" occurs 0 times in a.go")
	require.NoError(t, os.WriteFile(path, []byte("c\nc\n"), 0o644))
	_, err = Apply(dir, Mutant{ID: "twice", File: "a.go", Old: "c", New: "d"})
	require.ErrorContains(t, err, "occurs 2 times")
	require.Error(t, Check(dir, []Mutant{{ID: "a", File: "a.go", Old: "c", New: "d"}}))
}

// A scenario written to kill a source mutant names it in its header
// (`proposed: source mutant ID (rendermac mutate)`); every id named there
// is a mutant of the catalogue, so a renamed or dropped mutant cannot leave
// a scenario pointing at nothing.
func TestScenariosNameCatalogueMutants(t *testing.T) {
	files, err := filepath.Glob("../scenarios/testdata/scenarios/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	ids := map[string]bool{}
	for _, m := range Catalogue {
		ids[m.ID] = true
	}
	named := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for line := range strings.SplitSeq(string(b), "\n") {
			rest, ok := strings.CutPrefix(line, "proposed: source mutant")
			if !ok {
				continue
			}
			rest = strings.TrimPrefix(rest, "s")
			list, _, _ := strings.Cut(rest, "(")
			for id := range strings.SplitSeq(list, ",") {
				id = strings.TrimSpace(id)
				require.True(t, ids[id], "%s names source mutant %q, which is not in mutate.Catalogue", filepath.Base(f), id)
				named++
			}
		}
	}
	require.Positive(t, named)
}

// A service-layer or store mutant is also tested with the conformance suite,
// which holds the contract cases server tests no longer repeat.
func TestTestPackagesIncludeConformanceForTheServiceLayer(t *testing.T) {
	require.Equal(t, []string{"./server/fencing", "./harness/conformance"}, testPackages("server/fencing/lease.go"))
	require.Equal(t, []string{"./server/...", "./harness/conformance"}, testPackages("server/store/migrations/00001_init.sql"))
	require.Equal(t, []string{"./server/api"}, testPackages("server/api/auth.go"))
}

// A mutant of a migration edits a definition still in force: its text (or
// InForce, pg_dump's form of it) is in server/store/schema.sql, the schema
// the migrations leave (kept current by the store's tests). A later
// migration that redefines the object makes this fail, naming the mutant
// to re-aim, instead of leaving it editing history that no database runs.
func TestMigrationMutantsEditTheSchemaInForce(t *testing.T) {
	schema, err := os.ReadFile("../../server/store/schema.sql")
	require.NoError(t, err)
	n := 0
	for _, m := range Catalogue {
		if !strings.HasPrefix(m.File, "server/store/migrations/") {
			require.Empty(t, m.InForce, "mutant %s: InForce is for migrations only", m.ID)
			continue
		}
		want := m.InForce
		if want == "" {
			want = m.Old
		}
		require.Contains(t, string(schema), want, "mutant %s edits %s, which is not in force: server/store/schema.sql has no %q "+
			"(a later migration redefines it: mutate that one, or set InForce to the dump's form)", m.ID, m.File, want)
		n++
	}
	require.Positive(t, n)
}
