package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is the service.name resource attribute of every span.
const ServiceName = "rendermac"

// instrumentation names the tracer of the database spans.
const instrumentation = "github.com/rendermac/rendermac/server/telemetry"

// sessionPath is the device WebSocket route, left untraced.
const sessionPath = "/v1/provider/ws"

// Enabled reports whether getenv names an OTLP endpoint for traces.
func Enabled(getenv func(string) string) bool {
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv returns a tracer provider exporting over OTLP/HTTP when getenv
// names an endpoint (Enabled), with its shutdown (flushing what is
// batched); otherwise a nil provider and a shutdown that does nothing. The
// endpoint is getenv's (so a caller may pass an environment of its own);
// the exporter and batcher read the process's other OTEL_* variables
// themselves.
func FromEnv(ctx context.Context, getenv func(string) string) (*sdktrace.TracerProvider, func(context.Context) error, error) {
	if !Enabled(getenv) {
		return nil, func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpointURL(getenv)))
	if err != nil {
		return nil, nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(),
		resource.NewSchemaless(attribute.String("service.name", ServiceName)))
	if err != nil {
		return nil, nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// endpointURL is where spans go, as the OTLP exporter specification reads
// the variables: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else
// OTEL_EXPORTER_OTLP_ENDPOINT with the signal's path /v1/traces appended.
func endpointURL(getenv func(string) string) string {
	if u := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); u != "" {
		return u
	}
	return strings.TrimSuffix(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "/") + "/v1/traces"
}

// Handler wraps h in otelhttp spans from tp (one server span per request,
// the device session route excepted), or returns h itself when tp is nil.
func Handler(h http.Handler, tp trace.TracerProvider) http.Handler {
	if tp == nil {
		return h
	}
	return otelhttp.NewHandler(h, "rendermac.api", otelhttp.WithTracerProvider(tp),
		otelhttp.WithFilter(func(r *http.Request) bool { return r.URL.Path != sessionPath }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }))
}

// PgxTracer returns a pgx query and batch tracer making one client span
// per statement or batch under the context's span, or nil when tp is nil.
func PgxTracer(tp trace.TracerProvider) *DBTracer {
	if tp == nil {
		return nil
	}
	return &DBTracer{tracer: tp.Tracer(instrumentation)}
}

// DBTracer is PgxTracer's tracer. It implements pgx.QueryTracer and
// pgx.BatchTracer.
type DBTracer struct{ tracer trace.Tracer }

var dbAttrs = []attribute.KeyValue{attribute.String("db.system.name", "postgresql")}

// start begins a client span under the context's span and keeps it under
// startedKey for finish; without a parent span it starts nothing.
func (t *DBTracer) start(ctx context.Context, name string, attrs ...attribute.KeyValue) context.Context {
	if !trace.SpanFromContext(ctx).SpanContext().IsValid() {
		return ctx // no parent: a background loop's statement
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(attrs, dbAttrs...)...))
	return context.WithValue(ctx, startedKey{}, span)
}

// startedKey holds the span start began, so that finish ends only that one
// and never the caller's own span.
type startedKey struct{}

// finish ends the span start began in ctx, if any, recording err.
func finish(ctx context.Context, err error) {
	span, ok := ctx.Value(startedKey{}).(trace.Span)
	if !ok {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// TraceQueryStart implements pgx.QueryTracer.
func (t *DBTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return t.start(ctx, "postgresql "+operation(data.SQL), attribute.String("db.query.text", data.SQL))
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *DBTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	finish(ctx, data.Err)
}

// TraceBatchStart implements pgx.BatchTracer.
func (t *DBTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	return t.start(ctx, "postgresql batch", attribute.Int("db.operation.batch.size", data.Batch.Len()))
}

// TraceBatchQuery implements pgx.BatchTracer.
func (t *DBTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (t *DBTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	finish(ctx, data.Err)
}

// operation is the statement's first keyword (SELECT, UPDATE, WITH, ...).
func operation(sql string) string {
	f := strings.Fields(sql)
	if len(f) == 0 {
		return "statement"
	}
	return strings.ToUpper(f[0])
}
