package targets

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
)

// txSignal is a pgx query tracer that reports the end of every transaction
// (a COMMIT or ROLLBACK command tag) on its pool. The full stack's lease
// gateway makes no other transactions than its Lease calls, so the end of
// one is the "offer attempt done" signal the wire does not give when no
// offer follows (no_job, no_slot).
type txSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

// arm returns a channel that receives at the end of the next transaction.
// Arm before sending the frame that causes it.
func (s *txSignal) arm() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ch = make(chan struct{}, 1)
	return s.ch
}

// TraceQueryStart implements pgx.QueryTracer.
func (s *txSignal) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (s *txSignal) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if tag := d.CommandTag.String(); tag != "COMMIT" && tag != "ROLLBACK" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		select {
		case s.ch <- struct{}{}:
		default:
		}
	}
}

// TraceBatchStart implements pgx.BatchTracer.
func (s *txSignal) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer: a pipelined transaction's
// COMMIT goes behind its writes, in their batch.
func (s *txSignal) TraceBatchQuery(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	s.TraceQueryEnd(ctx, c, pgx.TraceQueryEndData{CommandTag: d.CommandTag, Err: d.Err})
}

// TraceBatchEnd implements pgx.BatchTracer.
func (s *txSignal) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// sharedIDs is one seeded IDSource shared by the stack's service layers
// (the buyer-facing one draws job ids, the lease gateway's draws attempt
// ids and tokens), behind one lock so that draws from different goroutines
// are ordered for the race detector too. It counts token draws: a token is
// drawn exactly when Lease inserts an attempt, which tells the harness that
// an offer is on its way.
type sharedIDs struct {
	mu     sync.Mutex
	ids    protocol.IDSource
	tokens int
}

func (s *sharedIDs) NewJobID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids.NewJobID()
}

func (s *sharedIDs) NewAttemptID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids.NewAttemptID()
}

func (s *sharedIDs) NewCommitToken() (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens++
	return s.ids.NewCommitToken()
}

// tokensDrawn is how many commit tokens were drawn so far.
func (s *sharedIDs) tokensDrawn() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens
}
