package mutate

func init() { Catalogue = append(Catalogue, opkitMutants...) }

// opkitMutants break the Standard Webhooks headers as a receiver checks
// them. Scenario webhook_receiver, whose receiver verifies from SPEC
// section 6's text (not server/webhook's signer) and keeps a replay
// window on the scenario's clock, exists to kill them.
var opkitMutants = []Mutant{
	{ID: "webhook-std-sign-body-only", Kind: "webhook", File: "server/webhook/sign.go",
		Old: "m.Write([]byte(signed))", New: "_ = signed",
		What: "webhook-signature covers the body only, not webhook-id and webhook-timestamp: a replay with a fresh timestamp verifies", Rules: []string{"webhook.standard"}},
	{ID: "webhook-id-per-attempt", Kind: "webhook", File: "server/webhook/deliver.go",
		Old: "msgID := id ", New: "msgID := id + \"-\" + strconv.Itoa(w.Attempts) ",
		What: "webhook-id changes with every retry of one delivery: receivers deduplicating by it process a retried event twice", Rules: []string{"webhook.standard", "webhook.same-body"}},
	{ID: "webhook-timestamp-created-at", Kind: "webhook", File: "server/webhook/deliver.go",
		Old: "postErr = d.post(ctx, w, sent)", New: "postErr = d.post(ctx, w, w.CreatedAt)",
		What: "webhook-timestamp is the event's time, not the attempt's: every retry after the replay window is refused as stale", Rules: []string{"webhook.standard"}},
}
