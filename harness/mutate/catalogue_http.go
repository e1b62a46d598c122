package mutate

func init() { Catalogue = append(Catalogue, httpMutants...) }

// httpMutants break the HTTP surface as a device, an operator and a
// webhook receiver meet it: pairing codes, device tokens at the gateway's
// upgrade, and webhook signatures and retries. The scenarios pairing_*,
// device_token_refused and webhook_receiver exist to kill them.
var httpMutants = []Mutant{
	// Pairing (server/api).
	{ID: "api-pair-guess-off-by-one", Kind: "off-by-one", File: "server/api/pair.go",
		Old: "wrong_guesses + 1 >= $2", New: "wrong_guesses + 1 > $2",
		What: "a pairing code is burned only by the wrong guess after PairMaxGuesses: one guess too many", Rules: []string{"pair.guess-bound", "pair.order"}},
	{ID: "api-pair-guess-bound-low", Kind: "off-by-one", File: "server/api/pair.go",
		Old: "wrong_guesses + 1 >= $2", New: "wrong_guesses + 2 >= $2",
		What: "a pairing code is burned one wrong guess before PairMaxGuesses", Rules: []string{"pair.guess-bound", "pair.order"}},
	{ID: "api-pair-code-reusable", Kind: "single-use", File: "server/api/pair.go",
		Old: "SET used_at = $2, device_id = $3", New: "SET used_at = nullif($2::timestamptz, $2), device_id = nullif($3::uuid, $3::uuid)",
		What: "a redeemed pairing code is never marked used: it pairs any number of devices", Rules: []string{"pair.single-use"}},
	{ID: "api-pair-expiry-inclusive", Kind: "clock-arith", File: "server/api/pair.go",
		Old: "AND expires_at > $3", New: "AND expires_at >= $3",
		What: "a pairing code still pairs at the instant it expires", Rules: []string{"pair.expiry"}},
	// Device authentication (server/gateway).
	{ID: "gateway-auth-revoked-accepted", Kind: "auth", File: "server/gateway/sql.go",
		Old: " AND status <> 'revoked'", New: "",
		What: "the gateway upgrades a revoked device's token (its hello is then closed, but it got a WebSocket)", Rules: []string{"wire.auth"}},
	{ID: "gateway-auth-hash-accepted", Kind: "auth", File: "server/gateway/gateway.go",
		Old:  "sqlAuthDevice, protocol.HashCommitToken(token)).Scan(&id)",
		New:  `sqlAuthDevice+" OR token_hash = $2", protocol.HashCommitToken(token), token).Scan(&id)`,
		What: "the gateway also accepts the stored token hash as a token: a leaked devices row is a credential", Rules: []string{"wire.auth"}},
	{ID: "gateway-auth-token-case-folded", Kind: "auth", File: "server/gateway/gateway.go",
		Old:  "sqlAuthDevice, protocol.HashCommitToken(token)).Scan(&id)",
		New:  "sqlAuthDevice, protocol.HashCommitToken(strings.ToLower(token))).Scan(&id)",
		What: "the gateway hashes the token case-folded: a paired device's token (base64url) never authenticates", Rules: []string{"wire.auth"}},
	{ID: "gateway-hello-revoked-welcomed", Kind: "auth", File: "server/gateway/frames.go",
		Old: "if !ok {\n\t\t_ = s.conn.Close(websocket.StatusPolicyViolation", New: "if false && !ok {\n\t\t_ = s.conn.Close(websocket.StatusPolicyViolation",
		What: "a device revoked between its upgrade and its hello is welcomed instead of closed with 1008", Rules: []string{"wire.revoked-at-hello"}},
	{ID: "gateway-hello-forgets-live-attempts", Kind: "auth", File: "server/gateway/sql.go",
		Old: "slots_total = greatest($3::int, (` + sqlCountLive + `)::int)", New: "slots_total = $3::int",
		What: "a hello that shrinks its slots below the device's live attempts lowers slots_total under them (invariant 9)", Rules: []string{"inv.9"}},
	{ID: "gateway-claim-ends-after-write", Kind: "slot", File: "server/gateway/offer.go",
		Old:  "\ts.unclaim(0)\n\tsent := s.write(offer)\n\ts.g.svc.FaultPoints().Hit(s.g.ctx, faultpoint.GatewayAfterOfferWrite)\n",
		New:  "\tsent := s.write(offer)\n\ts.g.svc.FaultPoints().Hit(s.g.ctx, faultpoint.GatewayAfterOfferWrite)\n\ts.unclaim(0)\n",
		What: "an offer's claim ends after its write, so a slots report read meanwhile counts the offered slot twice", Rules: []string{"order.slots-report"}},
	// Webhook signatures and retries (server/webhook).
	{ID: "webhook-sign-payload-only", Kind: "webhook", File: "server/webhook/deliver.go",
		Old: "Sign(BuyerSecret(d.key, w.BuyerID), body))", New: "Sign(BuyerSecret(d.key, w.BuyerID), w.Payload))",
		What: "the signature covers the event's data only, not the body's delivery_id, event and created_at", Rules: []string{"webhook.legacy"}},
	{ID: "webhook-sign-key-unprefixed", Kind: "webhook", File: "server/webhook/sign.go",
		Old: "m := hmac.New(sha256.New, []byte(secret))", New: "m := hmac.New(sha256.New, []byte(strings.TrimPrefix(secret, SecretPrefix)))",
		What: "deliveries are signed with the secret minus its whsec_ prefix, not the secret as printed", Rules: []string{"webhook.legacy", "webhook.secret"}},
	{ID: "webhook-retry-never-due", Kind: "webhook", File: "server/webhook/outbox.go",
		Old: "SET last_error = $3, next_attempt_at = $4", New: "SET last_error = $3, next_attempt_at = $4::timestamptz + interval '100 years'",
		What: "a failed webhook POST is rescheduled a century out: never retried in practice", Rules: []string{"webhook.retry"}},
}
