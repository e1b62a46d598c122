package mutate

// consoleMutants break the console's actions and the drain frame (SPEC
// sections 5 and 6, "Console actions", "Drain"); scenarios 340 to 343
// kill them.
var consoleMutants = []Mutant{
	{ID: "console-action-unguarded", Kind: "console-auth", File: "server/console/csrf.go",
		Old:   "\treturn c.guard(c.checkAction(h))\n",
		New:   "\treturn c.checkAction(h)\n",
		What:  "an action's POST skips the console's guard: a buyer's key, a device token or no credential is judged by the CSRF check alone (403 csrf_refused, not 403 forbidden or 401) (killed by console_actions_refused)",
		Rules: []string{"console.action-operators"}},
	{ID: "console-action-csrf-presence-only", Kind: "console-auth", File: "server/console/csrf.go",
		Old:   "\t\tif !hmac.Equal([]byte(got), []byte(c.csrfToken(s))) {\n",
		New:   "\t\tif got == \"\" || s.operatorID == \"\" {\n",
		What:  "an action's POST needs a CSRF token but any will do: another session's token acts (killed by console_actions_refused)",
		Rules: []string{"console.action-csrf"}},
	{ID: "console-cancel-journals-buyer", Kind: "console-journal", File: "server/fencing/cancel.go",
		Old:   "err := s.pipelined(ctx, OpCancel, now, protocol.ActorOperator, func(b *pgx.Batch) { l.queue(b, jobID) },",
		New:   "err := s.pipelined(ctx, OpCancel, now, protocol.ActorBuyer, func(b *pgx.Batch) { l.queue(b, jobID) },",
		What:  "an operator's cancel is journalled as the buyer's: the journal no longer says which operator stopped the job (killed by console_actions_refused, console_cancel_running)",
		Rules: []string{"console.action-journal"}},
	{ID: "gateway-offers-drained-device", Kind: "gateway-drain", File: "server/gateway/offer.go",
		Old:   "\treturn !s.welcomed || s.draining || s.deviceDrained || s.revoked || s.ended\n",
		New:   "\treturn !s.welcomed || s.draining || s.revoked || s.ended\n",
		What:  "after sending drain the gateway keeps offering into the device's free slots (killed by console_drain)",
		Rules: []string{"wire.drain"}},
	{ID: "gateway-drain-not-at-hello", Kind: "gateway-drain", File: "server/gateway/frames.go",
		Old:   "\tif drain {\n\t\t// An operator drained the device while no session of it was here.\n\t\ts.drainDevice()\n\t}\n",
		New:   "\t_ = drain\n",
		What:  "a drain requested while the device was away is never sent: its next session is offered work (killed by console_drain)",
		Rules: []string{"wire.drain-at-hello"}},
	{ID: "agent-ignores-drain", Kind: "agent-drain", File: "agent/dispatch.go",
		Old:   "\t\ta.log.Info(\"gateway: an operator drained this device\")\n\t\ta.Drain()\n",
		New:   "\t\ta.log.Info(\"gateway: an operator drained this device\")\n",
		What:  "the agent logs the drain frame and keeps reporting free slots and taking offers (killed by console_drain_agent)",
		Rules: []string{"agent.drain-frame"}},
}

func init() { Catalogue = append(Catalogue, consoleMutants...) }
