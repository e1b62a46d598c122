package mutate

// inputMutants break the check of an uploaded input at job creation
// (server/api/inputs.go): the upload must be exactly the bytes its
// input_id declares. qualify kills them through the scenario catalogue:
// uploaded_input (scenario 80) names an upload whose SHA-256 is not the
// declared one and wants the create refused.
var inputMutants = []Mutant{
	{ID: "input-hash-unchecked", Kind: "condition", File: "server/api/inputs.go",
		Old:  "case obj.SHA256 != sha:",
		New:  "case obj.SHA256 != sha && obj.Bytes < 0:",
		What: "a job is created from an upload whose SHA-256 is not the declared one: the job's input is not what its input_sha256 says (killed by uploaded_input)", Rules: []string{"input.checked-at-create", "input.hashed-at-create"}},
}

func init() { Catalogue = append(Catalogue, inputMutants...) }
