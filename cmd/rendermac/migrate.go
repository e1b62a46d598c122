package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/rendermac/rendermac/server/store"
)

// runMigrate applies the embedded migrations. `rendermac server` migrates
// on start too; this is for deploys that migrate as a separate step.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	set := newFlagSet("migrate", "--db URL", stderr)
	db := set.String("db", os.Getenv("DATABASE_URL"), "Postgres URL (env DATABASE_URL)")
	if err := parseFlags(set, args); err != nil {
		return err
	}
	if *db == "" {
		return usageError{"--db (or DATABASE_URL) is required"}
	}
	if err := store.Migrate(ctx, *db); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "migrations applied")
	return nil
}
