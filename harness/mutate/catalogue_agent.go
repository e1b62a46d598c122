package mutate

// agentMutants break the shipped agent (package agent) in ways the control
// plane's own checks can miss: the server refuses the bad frame, so its
// rows stay correct, and only the agent's behaviour on the wire shows the
// defect. qualify kills them because the scenario catalogue runs the agent
// package in process through a recording relay (scenarios 61 to 65,
// harness/scenarios/scenario_realagent.go) and checks every frame it sends.
var agentMutants = []Mutant{
	{ID: "agent-token-per-job", Kind: "agent-identity", File: "agent/attempt.go",
		Old: "func (at *attempt) frame(d *decision) any {\n\to := at.offer\n",
		New: "var firstToken = map[string]string{}\n\nfunc (at *attempt) frame(d *decision) any {\n\to := at.offer\n" +
			"\tif t, ok := firstToken[o.JobID]; ok {\n\t\tat.token = t\n\t} else {\n\t\tfirstToken[o.JobID] = at.token\n\t}\n",
		What: "the agent keeps a job's first commit token and signs a retry's commit or fail with it (killed by agent_retry_same_process)", Rules: []string{"agent.echo", "token.single-use"}},
	{ID: "agent-ignores-attempt-gone", Kind: "agent-fence", File: "agent/dispatch.go",
		Old:  "a.log.Warn(\"lease_conflict: attempt gone; stopping it without commit\", attrs...)\n\t\ta.endLocked(at, errLeaseLost)",
		New:  "a.log.Warn(\"lease_conflict: attempt gone; carrying on\", attrs...)",
		What: "told its attempt is gone, the agent keeps rendering, reports progress and commits for it (killed by agent_attempt_gone_while_running)", Rules: []string{"agent.attempt-gone", "wire.attempt-lost"}},
	{ID: "agent-reconnect-bumps-epoch", Kind: "agent-identity", File: "agent/attempt.go",
		Old:  "\tat.unsent = nil\n\tat.finalSent = false\n",
		New:  "\tat.unsent = nil\n\tat.finalSent = false\n\tif c, ok := at.final.(*protocol.Commit); ok {\n\t\tc.LeaseEpoch++\n\t}\n",
		What: "on reconnect the agent re-sends its pending commit with an epoch of its own making (killed by agent_cut_before_commit)", Rules: []string{"agent.echo", "wire.resume"}},
	{ID: "agent-ignores-cancel", Kind: "agent-fence", File: "agent/dispatch.go",
		Old:  "a.log.Info(\"cancel: stopping the attempt\", at.logAttrs()...)\n\tat.cancel(errBuyerCancelled)",
		New:  "a.log.Info(\"cancel: noted; rendering on\", at.logAttrs()...)",
		What: "the agent logs a buyer's cancel and keeps rendering the cancelled job (killed by agent_cancel_while_rendering)", Rules: []string{"cancel.live"}},
	{ID: "agent-retries-rejected-commit", Kind: "agent-fence", File: "agent/dispatch.go",
		Old:  "\ta.endLocked(at, errAttemptOver)\n}",
		New:  "\tif typ == protocol.TypeCommitRejected {\n\t\tat.finalSent = false\n\t\tsignal(a.wake)\n\t\treturn\n\t}\n\ta.endLocked(at, errAttemptOver)\n}",
		What: "a rejected commit is sent again instead of ending the attempt: the lost attempt keeps its slot (killed by agent_reconnect_after_expiry)", Rules: []string{"agent.attempt-gone"}},
}

func init() { Catalogue = append(Catalogue, agentMutants...) }
