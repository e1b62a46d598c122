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
	require.Regexp(t, `^[A-HJ-NP-Z2-9]{4}(-[A-HJ-NP-Z2-9]{4}){5}$`, code)
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

// wrongSecret keeps code's id (its first two groups) and changes the first
// group of its secret, a different way for each n.
func wrongSecret(code string, n int) string {
	group := strings.Repeat(string("ABCDEFGH"[n%8]), 3)
	if code[10:13] == group {
		group = "222"
	}
	return code[:10] + group + code[13:]
}

// A wrong secret at a code's id counts against that code; the
// PairMaxGuesses-th burns it, after which even the right code is refused.
func TestPairingCodeBurnedAfterWrongGuesses(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) { c.PairMaxGuesses = 3 })
	code := b.pairingCode(t, time.Hour)
	other := b.pairingCode(t, time.Hour)
	for i := range 3 {
		guess := wrongSecret(code, i)
		require.NotEqual(t, code, guess)
		requireError(t, b.pair(t, guess), http.StatusUnauthorized, "invalid_pairing_code")
	}
	var guesses int
	var burned bool
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT wrong_guesses, burned_at IS NOT NULL FROM pairing_codes WHERE code_hash = $1`,
		api.HashSecret(api.NormalizePairingCode(code))).Scan(&guesses, &burned))
	require.Equal(t, 3, guesses)
	require.True(t, burned)
	requireError(t, b.pair(t, code), http.StatusUnauthorized, "invalid_pairing_code")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM devices`), "a burned code pairs nothing")

	// Guesses at one code do not touch another.
	require.Equal(t, http.StatusCreated, b.pair(t, other).Status)
}

func TestPairingCodeSurvivesFewerWrongGuesses(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) { c.PairMaxGuesses = 3 })
	code := b.pairingCode(t, time.Hour)
	for i := range 2 {
		requireError(t, b.pair(t, wrongSecret(code, i)), http.StatusUnauthorized, "invalid_pairing_code")
	}
	// Guesses at an id no code has count nowhere.
	requireError(t, b.pair(t, "ZZZZ-ZZZZ"+code[9:]), http.StatusUnauthorized, "invalid_pairing_code")
	require.Equal(t, http.StatusCreated, b.pair(t, code).Status, "2 wrong guesses of 3 leave the code usable")
	// Used: a wrong guess now counts nothing (the code is dead already).
	requireError(t, b.pair(t, wrongSecret(code, 5)), http.StatusUnauthorized, "invalid_pairing_code")
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM pairing_codes WHERE burned_at IS NOT NULL`))
	require.Equal(t, 2, b.count(t, `SELECT wrong_guesses FROM pairing_codes`))
}

// The default bound is DefaultPairMaxGuesses.
func TestPairingCodeDefaultGuessBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code := b.pairingCode(t, time.Hour)
	for i := range api.DefaultPairMaxGuesses - 1 {
		requireError(t, b.pair(t, wrongSecret(code, i)), http.StatusUnauthorized, "invalid_pairing_code")
	}
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM pairing_codes WHERE burned_at IS NOT NULL`))
	requireError(t, b.pair(t, wrongSecret(code, 7)), http.StatusUnauthorized, "invalid_pairing_code")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM pairing_codes WHERE burned_at IS NOT NULL`))
}

// A code minted before migration 00003 has no id; it is redeemed by hash.
func TestPairingLegacyCodeWithoutID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const legacy = "ABCD-EFGH-JKLM-NPQR"
	_, err := b.pool.Exec(context.Background(),
		`INSERT INTO pairing_codes (code_hash, created_at, expires_at) VALUES ($1, $2, $3)`,
		api.HashSecret(api.NormalizePairingCode(legacy)), b.clock(), b.clock().Add(time.Minute))
	require.NoError(t, err)
	requireError(t, b.pair(t, "ABCD-EFGH-JKLM-NPQS"), http.StatusUnauthorized, "invalid_pairing_code")
	require.Equal(t, http.StatusCreated, b.pair(t, legacy).Status)
	requireError(t, b.pair(t, legacy), http.StatusUnauthorized, "invalid_pairing_code")
}

func TestPairingCodeTTLBounds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, ttl := range []time.Duration{0, -time.Second, api.MaxPairingCodeTTL + time.Second} {
		_, _, err := api.CreatePairingCode(context.Background(), b.pool, b.clock(), ttl)
		require.ErrorContains(t, err, "must be positive and at most 24h0m0s", "ttl %v", ttl)
	}
	b.pairingCode(t, api.MaxPairingCodeTTL)
}
