package controlplane

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/console"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/gateway"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/metrics"
)

// Parts are what one control-plane process is assembled from: its pool,
// artifact store, id source, grant signer, clock and log, and the settings
// of its three layers. Run builds them from a Config; the harness builds
// them over its own pool, store and pinned clock, so that every stack,
// production or test, is wired by Assemble alone.
type Parts struct {
	Pool   *pgxpool.Pool
	Store  artifact.Store
	IDs    protocol.IDSource
	Signer *grant.Signer
	// Grants issues the offers' and downloads' artifact URLs (nil: Signer,
	// the filesystem store's signed URLs); Gateway.Grants and API.Grants
	// are overwritten.
	Grants grant.Issuer
	// Clock is the gateway's and the API's (nil: clock.Real, every decision
	// at the database clock); Gateway.Clock and API.Clock are overwritten.
	Clock clock.Clock
	Log   *slog.Logger
	// Metrics is the registry the gateway and the API count into (nil: a
	// new one).
	Metrics *metrics.Metrics
	Service fencing.Config
	Gateway gateway.Config
	// API.Gateway is overwritten with the assembled gateway's handler,
	// API.Console with the console's.
	API api.Config
	// Console is the operators' web console at /console (its Clock is
	// overwritten with Clock, its Limits with API.Limits).
	Console console.Config
}

// Assembly is one assembled process. Nothing runs yet: serve API.Handler()
// (which also serves the gateway's WebSocket route), run Gateway.Run for
// the listener, poll and sweep loops, and Gateway.Shutdown to drain.
type Assembly struct {
	Service *fencing.Service
	Gateway *gateway.Gateway
	API     *api.API
	Metrics *metrics.Metrics
	// Console is served under /console by API.Handler; Shutdown it before
	// the HTTP server's, or its live streams hold the drain.
	Console *console.Console
}

// Assemble wires one process in the one order every stack uses: the
// fenced service layer over the pool and the store; the device gateway on
// that service; the HTTP API on the same service, serving the gateway's
// route, with the same clock, signer and metrics; the operators' console
// over the same pool and signer, served by the API's handler under /console.
func Assemble(p Parts) *Assembly {
	if p.Log == nil {
		p.Log = slog.New(slog.DiscardHandler)
	}
	m := p.Metrics
	if m == nil {
		m = metrics.New()
	}
	svc := fencing.NewService(p.Pool, p.Store, p.IDs, p.Service)
	gcfg := p.Gateway
	gcfg.Clock, gcfg.Grants = p.Clock, p.Grants
	gw := gateway.New(svc, p.Pool, p.Signer, m, p.Log, gcfg)
	ccfg := p.Console
	ccfg.Clock, ccfg.Limits, ccfg.Pauser, ccfg.Actions = p.Clock, p.API.Limits, svc, svc
	ccfg.Grants, ccfg.DownloadTTL = p.Grants, p.API.DownloadTTL
	con := console.New(p.Pool, p.Signer, p.Log, ccfg)
	acfg := p.API
	acfg.Gateway, acfg.Clock, acfg.Grants, acfg.Console = gw.Handler(), p.Clock, p.Grants, con.Handler()
	return &Assembly{Service: svc, Gateway: gw, Metrics: m, Console: con,
		API: api.New(svc, p.Pool, p.Store, p.Signer, m, p.Log, acfg)}
}
