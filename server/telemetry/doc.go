// Package telemetry is the control plane's OpenTelemetry tracing: spans for
// the HTTP API (otelhttp) and for the database (a pgx tracer, composed with
// the store's counting tracer), exported over OTLP/HTTP.
//
// It is on only when OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; the exporter then reads the
// standard OTEL_* variables itself (headers, timeout, batching). Off, FromEnv
// returns a nil provider and the wiring adds nothing: no handler wrapper, no
// database tracer, so tracing costs nothing when unused.
//
// Database spans are made only under a span already in the context (an
// API request's): the gateway's and the deliverer's background loops,
// which poll every second, would otherwise flood the trace store with
// one-statement root traces. The WebSocket session route is not traced
// either: its span would last as long as the device's session.
package telemetry
