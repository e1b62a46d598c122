package store_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/server/store"
)

var updateSchema = flag.Bool("update", false, "rewrite schema.sql from a freshly migrated database")

// schemaHeader opens schema.sql: what the file is and how it is made.
const schemaHeader = `-- The schema in force: what the migrations in migrations/ leave in a database,
-- as pg_dump prints it (owners, privileges, comments and session settings
-- dropped). Generated, never edited: TestSchemaInForceIsCurrent fails when
-- it differs from a freshly migrated database; rewrite it with
--   go test ./server/store/ -run TestSchemaInForceIsCurrent -update
-- Read it to see a table, trigger or function as it is now; the migrations
-- are the history (a later one may redefine what an earlier one made).
`

// TestSchemaInForceIsCurrent keeps schema.sql equal to the schema a
// database has after Migrate, so readers and the mutation catalogue (its
// migration mutants must edit definitions still in force) can trust it.
func TestSchemaInForceIsCurrent(t *testing.T) {
	t.Parallel()
	url := pgprovider.MustDatabase(t, templateName, store.Migrate)
	bin, err := pgprovider.BinDir()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "pg_dump"), "--schema-only", "--no-owner", "--no-privileges",
		"--no-comments", "--exclude-table=public.goose_db_version", "--dbname", url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	dump, err := cmd.Output()
	if err != nil {
		t.Fatalf("pg_dump: %v: %s", err, stderr.String())
	}
	got := schemaHeader + normalizeDump(string(dump))
	want, err := os.ReadFile("schema.sql")
	if *updateSchema {
		if err := os.WriteFile("schema.sql", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err != nil {
		t.Fatalf("schema.sql: %v (generate it: go test ./server/store/ -run TestSchemaInForceIsCurrent -update)", err)
	}
	if string(want) != got {
		t.Fatalf("server/store/schema.sql is not the schema the migrations make; a migration changed without it.\n"+
			"Rewrite it: go test ./server/store/ -run TestSchemaInForceIsCurrent -update\nfirst difference: %s", firstDiff(string(want), got))
	}
}

var blankRuns = regexp.MustCompile(`\n{3,}`)

// normalizeDump drops what depends on the dumping client and server rather
// than on the schema: comments, SET lines and the search_path reset.
func normalizeDump(dump string) string {
	var keep []string
	for l := range strings.SplitSeq(dump, "\n") {
		if strings.HasPrefix(l, "--") || strings.HasPrefix(l, "SET ") || strings.HasPrefix(l, "SELECT pg_catalog.set_config(") ||
			strings.HasPrefix(l, `\restrict`) || strings.HasPrefix(l, `\unrestrict`) {
			continue
		}
		keep = append(keep, l)
	}
	return strings.TrimLeft(blankRuns.ReplaceAllString(strings.Join(keep, "\n"), "\n\n"), "\n")
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: file has %q, database has %q", i+1, x, y)
		}
	}
	return "none"
}
