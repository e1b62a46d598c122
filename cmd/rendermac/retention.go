package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/controlplane"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// parseAge reads a retention age: a Go duration (36h, 90m) or whole days
// (90d); "0" and "off" are zero (nothing pruned). A negative age, or
// anything else, is an error naming what is wrong.
func parseAge(flagName, s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "", "0", "off":
		return 0, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > 100*365 {
			return 0, usageError{fmt.Sprintf("%s %q: want whole days such as 90d (0 to 36500), or a duration such as 36h", flagName, s)}
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, usageError{fmt.Sprintf("%s %q: want a duration such as 36h or whole days such as 90d", flagName, s)}
		}
	}
	if d < 0 {
		return 0, usageError{fmt.Sprintf("%s %q: a retention age cannot be negative", flagName, s)}
	}
	return d, nil
}

// adminPrune is `rendermac admin prune`: retention run once, by hand.
func adminPrune(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := adminFlagSet("prune", stderr, true)
	olderThan := f.String("older-than", "", "prune finished jobs whose terminal time is more than this long ago: 90d, 36h (required)")
	batch := f.Int("batch", fencing.DefaultPruneBatch, "jobs per batch transaction (1..10000)")
	dryRun := f.Bool("dry-run", false, "count what would be pruned, change nothing")
	artifacts := f.String("artifacts", os.Getenv("RENDERMAC_ARTIFACTS"),
		"the server's artifact store, a directory or s3://BUCKET/PREFIX, whose objects of pruned jobs are deleted (env RENDERMAC_ARTIFACTS; required unless --dry-run)")
	s3Endpoint := f.String("s3-endpoint", os.Getenv("RENDERMAC_S3_ENDPOINT"), "S3 endpoint URL, as the server's (env RENDERMAC_S3_ENDPOINT)")
	s3PathStyle := f.Bool("s3-path-style", os.Getenv("RENDERMAC_S3_PATH_STYLE") == "1", "path-style bucket addressing, as the server's")
	if err := parseFlags(f.FlagSet, args); err != nil {
		return err
	}
	age, err := parseAge("--older-than", *olderThan)
	switch {
	case err != nil:
		return err
	case *olderThan == "":
		return usageError{"--older-than is required (e.g. 90d)"}
	case *batch < 1 || *batch > 10000:
		return usageError{fmt.Sprintf("--batch %d: want 1..10000", *batch)}
	case !*dryRun && *artifacts == "":
		return usageError{"--artifacts (or RENDERMAC_ARTIFACTS) is required: a prune deletes the pruned jobs' objects from the store"}
	}
	pool, err := f.openPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	now, err := store.ResolveNow(ctx, pool, time.Time{})
	if err != nil {
		return err
	}
	bound := now.Add(-age)
	if *dryRun {
		st, err := adminService(pool).CountPrunable(ctx, bound)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "dry run: would prune %d finished jobs (terminal before %s) with %d attempts, %d journal rows, %d holds, %d webhook rows and their objects; %d object keys queued by earlier prunes\n",
			st.Jobs, bound.Format(time.RFC3339), st.Attempts, st.Events, st.Holds, st.Webhooks, st.Objects)
		return nil
	}
	st, closeStore, err := controlplane.OpenArtifactStore(ctx, *artifacts, artifact.S3Config{Endpoint: *s3Endpoint, PathStyle: *s3PathStyle})
	if err != nil {
		return err
	}
	defer closeStore()
	svc := fencing.NewService(pool, st, protocol.RandomIDs{Jobs: rand.Reader, Attempts: rand.Reader, Tokens: rand.Reader}, fencing.Config{})
	res, err := svc.PruneFinished(ctx, bound, *batch)
	fmt.Fprintf(stdout, "pruned %d finished jobs (terminal before %s) in %d batches: %d attempts, %d journal rows, %d holds, %d webhook rows, %d objects deleted\n",
		res.Jobs, bound.Format(time.RFC3339), res.Batches, res.Attempts, res.Events, res.Holds, res.Webhooks, res.Objects)
	return err
}
