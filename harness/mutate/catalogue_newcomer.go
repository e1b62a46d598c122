package mutate

func init() { Catalogue = append(Catalogue, append(newcomerMutants, failMessageMutants...)...) }

// newcomerMutants break the rules a new buyer meets first (issue 49): a
// param the service does not declare is refused at the door, and a
// refusal's message says what is allowed in JSON's words. Scenario
// create_errors_say_what_is_allowed exists to kill them.
var newcomerMutants = []Mutant{
	{ID: "create-undeclared-param-accepted", Kind: "refusal", File: "server/fencing/create.go",
		Old:   "if spec, declared := svc.Param(k); !declared || !spec.Accepts(v) {",
		New:   "if spec, declared := svc.Param(k); declared && !spec.Accepts(v) {",
		What:  "a param the service does not declare is accepted, as before issue 49: the job is created and the runner fails it runner_failed",
		Rules: []string{"create.undeclared-param"}},
	{ID: "api-validation-message-without-range", Kind: "message", File: "server/api/jobs.go",
		Old: "why[\"max_attempts\"] = fmt.Sprintf(\"max_attempts must be an integer %d..%d, got %d\",\n" +
			"\t\t\tprotocol.MaxAttemptsMin, protocol.MaxAttemptsMax, m.v)",
		New:   "why[\"max_attempts\"] = fmt.Sprintf(\"max_attempts is invalid (%d)\", m.v)",
		What:  "a max_attempts out of range is refused as invalid without the range allowed",
		Rules: []string{"api.validation-message"}},
	{ID: "api-type-message-go-type", Kind: "message", File: "server/api/createbody.go",
		Old:   "return fmt.Sprintf(\"%s must be %s, got %s\", field, jsonKind(typeErr.Type), typeErr.Value)",
		New:   "return fmt.Sprintf(\"%s must be %s, got %s\", field, typeErr.Type, typeErr.Value)",
		What:  "a value of the wrong JSON type is refused naming a Go type (map[string]json.RawMessage) instead of the JSON kind",
		Rules: []string{"api.validation-message"}},
	{ID: "api-undeclared-param-message-without-params", Kind: "message", File: "server/api/createbody.go",
		Old:   "return fmt.Sprintf(\"params.%s is not a param of %s; %s\", k, svc.Name, declaredParams(svc)), true",
		New:   "return fmt.Sprintf(\"params.%s is invalid\", k), true",
		What:  "an undeclared param is refused without the params the service declares",
		Rules: []string{"api.validation-message"}},
}

// failMessageMutants break the rules that show why an attempt failed.
var failMessageMutants = []Mutant{
	{ID: "fail-message-dropped", Kind: "write", File: "server/fencing/fail.go",
		Old:   "if msg := protocol.CleanFailMessage(f.Message, f.CommitToken); msg != \"\" {",
		New:   "if msg := protocol.CleanFailMessage(f.Message, f.CommitToken); false && msg != \"\" {",
		What:  "a fail's message is dropped, as before issue 49: the buyer sees runner_failed and never why",
		Rules: []string{"fail.message-stored"}},
	{ID: "fail-message-not-cleaned", Kind: "secret", File: "server/fencing/fail.go",
		Old:   "if msg := protocol.CleanFailMessage(f.Message, f.CommitToken); msg != \"\" {",
		New:   "if msg := f.Message; msg != \"\" {",
		What:  "a fail's message is stored as the device sent it: its commit token, a grant's signature and an API key reach the buyer's job view",
		Rules: []string{"fail.message-clean"}},
}
