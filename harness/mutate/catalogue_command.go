package mutate

// commandMutants break the command runner (agent/runner/command.go), the
// runner kind for operator-installed composition renderers. qualify kills
// them because the scenario catalogue runs the shipped agent with a command
// runner whose program renders for a minute unless stopped (scenarios 78 and
// 79, `agent start ... runner=command`): a runner that does not stop it
// holds the attempt far past the frame timeout.
var commandMutants = []Mutant{
	{ID: "command-ignores-stop", Kind: "runner-stop", File: "agent/runner/command.go",
		Old:  "\t\tres.stopped = true\n\t\tres.state = c.terminate(cmd, waited, clk)\n",
		New:  "\t\tres.stopped = true\n\t\tres.state = <-waited\n",
		What: "a cancel, lost lease or shutdown does not stop the renderer: the runner waits for it to finish (killed by agent_command_cancel_while_rendering)", Rules: []string{"runner.command-stop", "runner.command-group"}},
	{ID: "command-no-time-limit", Kind: "runner-stop", File: "agent/runner/command.go",
		Old:  "case <-clk.After(c.timeout):",
		New:  "case <-clk.After(c.timeout * 3600):",
		What: "the command runner does not enforce the service's time limit (killed by agent_command_time_limit)", Rules: []string{"runner.command-failure"}},
}

func init() { Catalogue = append(Catalogue, commandMutants...) }
