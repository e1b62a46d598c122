package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/api"
)

func (b *bundle) pairingCode(t *testing.T, ttl time.Duration) string {
	t.Helper()
	code, expires, err := api.CreatePairingCode(context.Background(), b.pool, b.clock(), ttl)
	require.NoError(t, err)
	require.Equal(t, b.clock().Add(ttl), expires)
	require.Regexp(t, `^[A-Z2-9]{4}-[A-Z2-9]{4}-[A-Z2-9]{4}-[A-Z2-9]{4}$`, code)
	return code
}

func (b *bundle) pair(t *testing.T, code string) response {
	t.Helper()
	return b.do(t, http.MethodPost, "/v1/provider/pair", "",
		[]byte(`{"code":"`+code+`","name":"studio mac","services":["synthetic.mp4","synthetic.mp4"]}`))
}

func TestPairingCodeIsSingleUse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code := b.pairingCode(t, 10*time.Minute)
	// Codes are typed by people: case and dashes do not matter.
	r := b.pair(t, strings.ToLower(strings.ReplaceAll(code, "-", "")))
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
	require.Equal(t, "no-store", r.Header.Get("Cache-Control"))
	reply := r.json(t)
	id, token := reply["device_id"].(string), reply["device_token"].(string)
	require.True(t, strings.HasPrefix(token, "rmd_"))
	require.GreaterOrEqual(t, len(token), 4+43, "32 random bytes")

	var hash, status string
	var services []string
	var slots int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT token_hash, services, slots_total, status FROM devices WHERE id = $1`, id).Scan(&hash, &services, &slots, &status))
	require.Equal(t, api.HashSecret(token), hash, "only the token's hash is stored")
	require.Equal(t, []string{"synthetic.mp4"}, services)
	require.Equal(t, 1, slots)
	require.Equal(t, "offline", status)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM pairing_codes WHERE device_id = $1 AND used_at IS NOT NULL`, id))

	requireError(t, b.pair(t, code), http.StatusUnauthorized, "invalid_pairing_code")
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM devices`), "the test device and the one paired")
}

func TestPairingCodeExpires(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code := b.pairingCode(t, time.Minute)
	b.advance(time.Minute)
	requireError(t, b.pair(t, code), http.StatusUnauthorized, "invalid_pairing_code")
	requireError(t, b.pair(t, "AAAA-BBBB-CCCC-DDDD"), http.StatusUnauthorized, "invalid_pairing_code")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM devices`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM pairing_codes WHERE used_at IS NULL`))
}

func TestPairingValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code := b.pairingCode(t, time.Minute)
	for _, c := range []struct{ body, field string }{
		{`{"code":"","name":"m","services":["synthetic.mp4"]}`, "code"},
		{`{"code":"` + code + `","name":" ","services":["synthetic.mp4"]}`, "name"},
		{`{"code":"` + code + `","name":"m","services":[]}`, "services"},
		{`{"code":"` + code + `","name":"m","services":["bitcoin.miner"]}`, "services"},
		{`{"code":"` + code + `","name":"m","services":["synthetic.mp4"],"slots":4}`, "slots"},
	} {
		requireError(t, b.do(t, http.MethodPost, "/v1/provider/pair", "", []byte(c.body)),
			http.StatusUnprocessableEntity, "validation_error", c.field)
	}
	// Refused requests did not use the code up.
	require.Equal(t, http.StatusCreated, b.pair(t, code).Status)
}

// TestConcurrentPairingPairsOnce races several devices for one code.
func TestConcurrentPairingPairsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code := b.pairingCode(t, time.Minute)
	const n = 8
	statuses := make(chan int, n)
	for range n {
		go func() {
			req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/v1/provider/pair",
				strings.NewReader(`{"code":"`+code+`","name":"m","services":["synthetic.mp4"]}`))
			resp, err := b.srv.Client().Do(req)
			if err != nil {
				statuses <- 0
				return
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	won := 0
	for range n {
		switch s := <-statuses; s {
		case http.StatusCreated:
			won++
		default:
			require.Equal(t, http.StatusUnauthorized, s)
		}
	}
	require.Equal(t, 1, won)
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM devices`))
}
