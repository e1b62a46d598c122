package mutate

// verifyMutants break verification with ffprobe (server/probe, the
// verdict in server/fencing/commit.go, the commit_rejected message) and
// the service catalogue (protocol/catalogue.go, the agent's runner
// registry). qualify kills them through the scenarios profile_checks,
// profile_duration and ffprobe_no_verdict (the installed ffprobe on
// committed outputs, and fakes in ffprobe's place with a 1 s timeout),
// catalogue_refused and catalogue_params.
var verifyMutants = []Mutant{
	// The profile's checks (killed by profile_checks).
	{ID: "profile-min-tracks-ignored", Kind: "verification", File: "server/probe/probe.go",
		Old: "minVideo := max(profile.MinVideoTracks, 1)", New: "minVideo := 1",
		What: "the profile's min_video_tracks is ignored: one video stream passes a profile asking for two", Rules: []string{"verify.profile"}},
	{ID: "profile-codec-after-width", Kind: "verification", File: "server/probe/probe.go",
		Old: `	case profile.Codec != "" && v.CodecName != profile.Codec:
		return &Mismatch{Field: "codec", Want: profile.Codec, Got: orNone(v.CodecName)}
	case profile.Width != 0 && v.Width != profile.Width:
		return &Mismatch{Field: "width", Want: strconv.Itoa(profile.Width), Got: strconv.Itoa(v.Width)}`,
		New: `	case profile.Width != 0 && v.Width != profile.Width:
		return &Mismatch{Field: "width", Want: strconv.Itoa(profile.Width), Got: strconv.Itoa(v.Width)}
	case profile.Codec != "" && v.CodecName != profile.Codec:
		return &Mismatch{Field: "codec", Want: profile.Codec, Got: orNone(v.CodecName)}`,
		What: "the profile checks the width before the codec: an output failing both is refused for its width, out of the contract's order", Rules: []string{"verify.profile"}},
	{ID: "profile-probes-codec-only", Kind: "verification", File: "protocol/service.go",
		Old: "func (v VerifyProfile) Probes() bool { return v != VerifyProfile{} }", New: `func (v VerifyProfile) Probes() bool { return v.Codec != "" }`,
		What: "ffprobe runs only for a profile that names a codec: a profile of a container or a track count alone checks nothing", Rules: []string{"verify.profile"}},
	// ffprobe's bounds (killed by ffprobe_no_verdict).
	{ID: "ffprobe-no-protocol-whitelist", Kind: "ffprobe-bound", File: "server/probe/probe.go",
		Old: `"-protocol_whitelist", "file", "-format_whitelist"`, New: `"-format_whitelist"`,
		What: "ffprobe runs without -protocol_whitelist file: a crafted input may make it open other protocols", Rules: []string{"verify.ffprobe-bounded"}},
	{ID: "ffprobe-no-format-whitelist", Kind: "ffprobe-bound", File: "server/probe/probe.go",
		Old: `"-format_whitelist", mp4Formats, "-i"`, New: `"-i"`,
		What: "ffprobe runs with every demuxer allowed, not the MP4 family's alone: it reads a Matroska file (or a playlist)", Rules: []string{"verify.ffprobe-bounded"}},
	{ID: "ffprobe-kills-leader-only", Kind: "ffprobe-bound", File: "server/probe/group_unix.go",
		Old: "return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)", New: "return cmd.Process.Kill()",
		What: "a timed-out ffprobe is killed alone, not with its process group: what it started runs on", Rules: []string{"verify.ffprobe-bounded"}},
	{ID: "ffprobe-no-timeout", Kind: "ffprobe-bound", File: "server/probe/probe.go",
		Old: "ctx, cancel := context.WithTimeout(ctx, timeout)", New: "ctx, cancel := context.WithCancel(ctx)",
		What: "ffprobe runs without its timeout: a hanging ffprobe holds verification (and the sweeper) for as long as it hangs", Rules: []string{"verify.ffprobe-bounded"}},
	{ID: "ffprobe-output-uncapped", Kind: "ffprobe-bound", File: "server/probe/probe.go",
		Old: "maxOutputBytes = 1 << 20", New: "maxOutputBytes = 1 << 30",
		What: "ffprobe's output is capped at a gigabyte, not a mebibyte (a units slip): the server buffers whatever it prints", Rules: []string{"verify.ffprobe-bounded"}},
	// An ffprobe that cannot answer is no verdict (killed by ffprobe_no_verdict).
	{ID: "ffprobe-error-is-verdict", Kind: "verification", File: "server/fencing/commit.go",
		Old: "if errors.Is(err, probe.ErrUnreadable) {", New: "if err != nil {",
		What: "any ffprobe error is a verdict: a missing ffprobe fails the job verification_failed instead of leaving the attempt committing", Rules: []string{"verify.no-verdict"}},
	{ID: "ffprobe-timeout-is-verdict", Kind: "verification", File: "server/probe/probe.go",
		Old: "case ctx.Err() != nil:", New: "case errors.Is(ctx.Err(), context.Canceled):",
		What: "a timed-out ffprobe, killed by its signal, reads as ffprobe refusing the file: the timeout fails the job", Rules: []string{"verify.no-verdict"}},
	// The refusal's message (killed by profile_checks).
	{ID: "verify-message-no-got", Kind: "message", File: "server/probe/probe.go",
		Old: `return fmt.Sprintf("%s: want %s, got %s", m.Field, m.Want, m.Got)`, New: `return fmt.Sprintf("%s: want %s", m.Field, m.Want)`,
		What: "a profile refusal names the check and the wanted value, not what the output holds", Rules: []string{"verify.message"}},
	{ID: "verify-message-not-recorded", Kind: "message", File: "server/fencing/commit.go",
		Old: `protocol.AttemptFailed, protocol.FailVerificationFailed); err != nil {
			return protocol.Reply{}, err
		}
		if err := st.recordVerdict(ctx, a.ID, verdict); err != nil {`,
		New: `protocol.AttemptFailed, protocol.FailVerificationFailed); err != nil {
			return protocol.Reply{}, err
		}
		if err := st.recordVerdict(ctx, a.ID, Verdict{Encoder: verdict.Encoder}); err != nil {`,
		What: "a refused output's verify_message is not recorded on the attempt: GET /v1/jobs/{id} does not say why", Rules: []string{"verify.message"}},
	// The encoder (killed by profile_checks).
	{ID: "encoder-version-prefix", Kind: "message", File: "server/probe/probe.go",
		Old: "return f[len(f)-1]", New: "return f[0]",
		What: "the recorded encoder is libavcodec's version (Lavc59.37.100), not the encoder the output names (libx264)", Rules: []string{"verify.encoder"}},
	// The duration check (killed by profile_duration).
	{ID: "duration-input-ignored", Kind: "verification", File: "server/fencing/commit.go",
		Old: "return probe.Expect{DurationS: d, AtMost: inputBytes > 0}, nil", New: "return probe.Expect{DurationS: d}, nil",
		What: "a job with an input is held to its duration param exactly, not at most: a shorter cut of the input is refused", Rules: []string{"catalogue.verify-duration"}},
	{ID: "duration-default-ignored", Kind: "verification", File: "server/fencing/commit.go",
		Old: "case !set:\n\t\ttext = spec.Default", New: "case !set:\n\t\ttext = params[spec.Name]",
		What: "a job without input that did not set the duration param is not held to the param's default (its unset value is read instead)", Rules: []string{"catalogue.verify-duration"}},
	// The catalogue's refusals (killed by catalogue_refused).
	{ID: "catalogue-unknown-fields", Kind: "refusal", File: "protocol/catalogue.go",
		Old: "dec.DisallowUnknownFields()\n", New: "\n",
		What: "a catalogue file's unknown fields are ignored (a misspelt field silently means its default)", Rules: []string{"catalogue.refused"}},
	{ID: "catalogue-duplicates-accepted", Kind: "refusal", File: "protocol/catalogue.go",
		Old: "if _, dup := FindService(out, s.Name); dup {", New: "if _, dup := FindService(out[:len(out)-i], s.Name); dup {",
		What: "a file entry is checked against the built-in services only: two entries of one name are both taken", Rules: []string{"catalogue.refused"}},
	{ID: "catalogue-builtin-name-reused", Kind: "refusal", File: "protocol/catalogue.go",
		Old: "if _, dup := FindService(out, s.Name); dup {", New: "if _, dup := FindService(out[len(out)-i:], s.Name); dup {",
		What: "a file entry is checked against the file's other entries only: it may reuse a built-in service's name", Rules: []string{"catalogue.builtin-names"}},
	{ID: "catalogue-name-uppercase", Kind: "refusal", File: "protocol/catalogue.go",
		Old: "if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.'", New: "if !('A' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.'",
		What: "a service name may hold upper-case letters (and [\\]^`), outside [a-z0-9._-]", Rules: []string{"catalogue.name"}},
	{ID: "catalogue-ffmpeg-takes-codec", Kind: "refusal", File: "protocol/catalogue.go",
		Old: `return unused("width", "height")`, New: `return unused("width", "height", "codec")`,
		What: "an ffmpeg runner takes a codec, a transcode's setting it ignores (it always encodes H.264)", Rules: []string{"catalogue.runner-settings"}},
	{ID: "catalogue-param-default-unchecked", Kind: "refusal", File: "protocol/catalogue.go",
		Old: "if !ok || !p.Accepts(text) {", New: "if !ok {",
		What: "a param's default is not held to its own declaration: a default of 11 for an integer 1..10 is taken", Rules: []string{"catalogue.params"}},
	{ID: "catalogue-duration-param-undeclared", Kind: "refusal", File: "protocol/catalogue.go",
		Old: "if !ok || (p.Type != ParamInteger && p.Type != ParamNumber) {", New: "if ok && p.Type != ParamInteger && p.Type != ParamNumber {",
		What: "a profile's duration_param may name a param the service does not declare", Rules: []string{"catalogue.verify-duration"}},
	{ID: "catalogue-transcode-codec-unchecked", Kind: "refusal", File: "protocol/catalogue.go",
		Old: `case s.Runner.Kind == RunnerTranscode && v.Codec != ""`, New: `case s.Runner.Kind == RunnerFFmpeg && v.Codec != ""`,
		What: "a transcode's profile may name another codec than its runner encodes (every output then fails verification)", Rules: []string{"catalogue.transcode-codec"}},
	// Declared params at create (killed by catalogue_params).
	{ID: "params-json-integer-refused", Kind: "refusal", File: "protocol/catalogue.go",
		Old: "&& (typ == ParamInteger || typ == ParamNumber):", New: "&& typ == ParamNumber:",
		What: "the API refuses a JSON number for an integer param (it takes them for number params only)", Rules: []string{"catalogue.params"}},
	{ID: "params-api-numbers-refused", Kind: "refusal", File: "server/api/createbody.go",
		Old: "declared && len(raw) > 0 && raw[0] != '\"' {", New: "declared && len(raw) > 0 && (raw[0] == 't' || raw[0] == 'f') {",
		What: "POST /v1/jobs takes JSON booleans for declared params but refuses JSON numbers for integer and number ones", Rules: []string{"catalogue.params"}},
	{ID: "params-integer-max-unchecked", Kind: "refusal", File: "protocol/catalogue.go",
		Old: "float64(n) >= p.Min && float64(n) <= p.Max", New: "float64(n) >= p.Min",
		What: "CreateJob holds a declared integer param to its min only: a value over its max is taken", Rules: []string{"catalogue.params"}},
	// The agent's refusals at start (killed by catalogue_refused).
	{ID: "agent-catalogue-skips-missing", Kind: "refusal", File: "agent/runner/registry.go",
		Old:  `return nil, fmt.Errorf("service %q is not in the catalogue (available: %s)", name, strings.Join(Names(catalogue), ", "))`,
		New:  "continue",
		What: "an agent offering a service its catalogue lacks starts anyway, without a runner for it", Rules: []string{"agent.catalogue"}},
	{ID: "agent-catalogue-kind-fallback", Kind: "refusal", File: "agent/runner/registry.go",
		Old: "k, ok := Kinds[svc.Runner.Kind]\n", New: "k, ok := Kinds[svc.Runner.Kind]\n\t\tif !ok { // an unknown kind renders as the synthetic one\n\t\t\tk, ok = Kinds[protocol.RunnerSynthetic], true\n\t\t}\n",
		What: "an agent runs a service of a runner kind it lacks as the synthetic kind instead of refusing to start", Rules: []string{"agent.catalogue"}},
}

func init() { Catalogue = append(Catalogue, verifyMutants...) }
