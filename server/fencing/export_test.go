package fencing

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
)

// PipelinedWritesForTest runs one pipelined transaction whose body makes
// each write in order (one: fenced) and then commits, as the service's
// operations do.
func (s *Service) PipelinedWritesForTest(ctx context.Context, now time.Time, writes ...TestWrite) error {
	return s.pipelined(ctx, "test", now, protocol.ActorSweeper, func(*pgx.Batch) {}, func(ctx context.Context, st *step) error {
		for _, w := range writes {
			if err := st.write(ctx, w.What, w.One, w.SQL, w.Args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestWrite is one write of PipelinedWritesForTest.
type TestWrite struct {
	What string
	One  bool
	SQL  string
	Args []any
}
