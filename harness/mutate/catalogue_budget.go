package mutate

func init() { Catalogue = append(Catalogue, budgetMutants...) }

// budgetMutants break the rules that keep a job's attempt budget for the
// attempts a device really had (issue 48): a stopping device is offered
// nothing into the slot its fail provider_offline frees, and an offer the
// gateway could not deliver, or that a closing device never answered, is
// withdrawn without charging the job. The scenarios 140-144 exist to kill
// them; the differential campaigns see the service layer's.
var budgetMutants = []Mutant{
	{ID: "gateway-offline-fail-frees-slot", Kind: "slot", File: "server/gateway/frames.go",
		Old:   "\t\ts.stopOffers()\n",
		New:   "\t\ts.release()\n",
		What:  "a fail provider_offline frees its slot: a stopping agent is offered its requeued jobs straight back and fails each again",
		Rules: []string{"gateway.offline-fail-keeps-slot"}},
	{ID: "gateway-undelivered-offer-failed-offline", Kind: "budget", File: "server/gateway/offer.go",
		Old: "\t\ts.withdraw(r, \"its write failed\")\n",
		New: "\t\t_, _ = s.g.svc.Fail(s.g.ctx, s.g.now(), s.deviceID, protocol.Fail{Type: protocol.TypeFail, JobID: r.JobID,\n" +
			"\t\t\tAttemptID: r.AttemptID, LeaseEpoch: r.LeaseEpoch, CommitToken: r.CommitToken, FailureCode: protocol.FailProviderOffline})\n",
		What:  "an offer the gateway could not write is given back with fail provider_offline, as before issue 48: the undelivered attempt spends the job's budget",
		Rules: []string{"gateway.undelivered-offer-withdrawn"}},
	{ID: "gateway-close-keeps-unanswered-offers", Kind: "budget", File: "server/gateway/offer.go",
		Old:   "keep := s.draining || closedBy != websocket.StatusNormalClosure",
		New:   "keep := true || s.draining || closedBy != websocket.StatusNormalClosure",
		What:  "a device's normal closure withdraws nothing: the offers it never answered wait for the sweeper, which charges them",
		Rules: []string{"gateway.close-withdraws-unanswered-offers"}},
	{ID: "withdraw-attempt-charged", Kind: "budget", File: "server/fencing/transitions.go",
		Old:   "inBudget := j.AttemptCount-j.WithdrawnCount < j.MaxAttempts",
		New:   "inBudget := j.AttemptCount < j.MaxAttempts",
		What:  "the requeue rule counts withdrawn offers as attempts: a job loses a retry to every offer it was never delivered",
		Rules: []string{"withdraw.attempt-not-charged"}},
	{ID: "withdraw-any-lease-phase", Kind: "fence", File: "server/fencing/withdraw.go",
		Old:   "if !ok || a.Status != protocol.AttemptLeased {",
		New:   "if !ok || !a.Status.LeasePhase() {",
		What:  "Withdraw takes back an attempt the device already acted on (downloading, running, uploading): its work is thrown away and the job runs twice",
		Rules: []string{"withdraw.fenced-to-leased", "withdraw.order"}},
}
