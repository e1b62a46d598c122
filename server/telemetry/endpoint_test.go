package telemetry

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The endpoint is read as the OTLP exporter specification reads it: the
// traces endpoint as it is, else the base endpoint with /v1/traces.
func TestEndpointURL(t *testing.T) {
	t.Parallel()
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	require.Equal(t, "http://collector:4318/v1/traces", endpointURL(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})))
	require.Equal(t, "http://collector:4318/otlp/v1/traces", endpointURL(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/otlp/"})))
	require.Equal(t, "https://x/traces", endpointURL(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://x/traces"})))
}
