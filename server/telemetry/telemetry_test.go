package telemetry_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/telemetry"
)

// Off unless an endpoint is named: no provider, the handler unwrapped and
// no database tracer, so an untraced server runs the same code as before.
func TestOffWithoutEndpoint(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	tp, shutdown, err := telemetry.FromEnv(context.Background(), getenv)
	require.NoError(t, err)
	require.Nil(t, tp)
	require.NoError(t, shutdown(context.Background()))
	var h http.Handler = &http.ServeMux{}
	require.Same(t, h, telemetry.Handler(h, nil))
	require.Nil(t, telemetry.PgxTracer(nil))

	env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://127.0.0.1:1/v1/traces"
	require.True(t, telemetry.Enabled(getenv))
	tp, shutdown, err = telemetry.FromEnv(context.Background(), getenv)
	require.NoError(t, err)
	require.NotNil(t, tp)
	_, unwrapped := telemetry.Handler(h, tp).(*http.ServeMux)
	require.False(t, unwrapped, "on: the handler is wrapped")
	require.NotNil(t, telemetry.PgxTracer(tp))
	require.NoError(t, shutdown(context.Background()), "nothing batched: shutdown sends nothing")
}
