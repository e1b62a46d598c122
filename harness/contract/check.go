package contract

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rendermac/rendermac/docs"
)

// Result is one table of the contract compared with protocol.
type Result struct {
	// Table names what was compared ("retryable failure codes").
	Table string
	// Source cites the line the contract states it on ("docs/SPEC.md:106"),
	// or the file when the text could not be read.
	Source string
	// Contract is what the text says, in short.
	Contract string
	// Detail is empty when protocol agrees; otherwise every difference, or
	// why the text could not be read.
	Detail string
}

// Passed reports whether protocol agrees with the contract on this table.
func (r Result) Passed() bool { return r.Detail == "" }

// CheckEmbedded compares protocol with the contract this binary embeds.
func CheckEmbedded() []Result { return Check(docs.SPEC, docs.Semantics, Protocol()) }

// Check compares t with the tables of spec (SPEC.md's text) and semantics
// (semantics.md's), one Result per table, in a fixed order.
func Check(spec, semantics string, t Tables) []Result {
	s := doc{name: docs.SPECFile, text: spec}
	m := doc{name: docs.SemanticsFile, text: semantics}
	var out []Result
	out = append(out, failureCodes(s, t)...)
	out = append(out, controlPlaneCodes(s, t), jobTable(s, t), attemptStatuses(s, t), attemptTable(s, t), maxAttempts(s, t),
		commitToken(s, t), readLimit(s, t), conflictReasons(s, t), replyCodes(s, m, t), createJobFields(m, t), actors(m, t),
		admissionWindow(m, t))
	return out
}

// unreadable is the result of a table whose text could not be read.
func unreadable(table, file string, err error) Result {
	return Result{Table: table, Source: file, Detail: err.Error()}
}

func ticked(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	return strings.Join(q, ", ")
}

// sameSet lists what only one side has, naming the sides.
func sameSet(spec, proto []string, protoName string) []string {
	var d []string
	for _, n := range spec {
		if !slices.Contains(proto, n) {
			d = append(d, fmt.Sprintf("`%s` is in the contract's list, not in %s", n, protoName))
		}
	}
	for _, n := range proto {
		if !slices.Contains(spec, n) {
			d = append(d, fmt.Sprintf("`%s` is in %s, not in the contract's list", n, protoName))
		}
	}
	return d
}

var (
	reRetryable    = regexp.MustCompile(`\bRetryable:`)
	reNotRetryable = regexp.MustCompile(`\bNot retryable:`)
)

// failureCodes: SPEC section 3, Fail: "Retryable: ... Not retryable: ...".
func failureCodes(s doc, t Tables) []Result {
	var out []Result
	for _, side := range []struct {
		table string
		re    *regexp.Regexp
		retry bool
	}{{"retryable failure codes", reRetryable, true}, {"non-retryable failure codes", reNotRetryable, false}} {
		names, at, err := s.listAfter(side.re, '.', side.table)
		if err != nil {
			out = append(out, unreadable(side.table, s.name, err))
			continue
		}
		var proto []string
		for _, c := range t.FailureCodes {
			if t.Retryable[c] == side.retry {
				proto = append(proto, c)
			}
		}
		what := "protocol.FailureCodes with IsRetryable() " + strconv.FormatBool(side.retry)
		out = append(out, Result{Table: side.table, Source: at, Contract: ticked(names),
			Detail: strings.Join(sameSet(names, proto, what), "; ")})
	}
	return out
}

var reControlPlane = regexp.MustCompile(`\bControl plane only:`)

// controlPlaneCodes: SPEC section 3, Fail: "Control plane only: ...": the
// failure codes the control plane sets and a fail may not carry.
func controlPlaneCodes(s doc, t Tables) Result {
	const table = "control-plane failure codes"
	names, at, err := s.listAfter(reControlPlane, '.', table)
	if err != nil {
		return unreadable(table, s.name, err)
	}
	d := sameSet(names, t.ControlPlaneCodes, "protocol.ControlPlaneCodes")
	for _, n := range names {
		if slices.Contains(t.FailureCodes, n) {
			d = append(d, fmt.Sprintf("`%s` is control plane only in the contract, but protocol.FailureCodes lets an agent send it", n))
		}
	}
	return Result{Table: table, Source: at, Contract: ticked(names), Detail: strings.Join(d, "; ")}
}

var reJobTable = regexp.MustCompile(`Job statuses and allowed transitions`)

// diffTransitions compares a transition table, pair by pair over statuses.
func diffTransitions(statuses []string, spec, proto map[string][]string, protoName string) []string {
	var d []string
	for _, from := range statuses {
		for _, to := range statuses {
			sa, pa := slices.Contains(spec[from], to), slices.Contains(proto[from], to)
			switch {
			case sa && !pa:
				d = append(d, fmt.Sprintf("%s -> %s: the contract allows it, %s refuses it", from, to, protoName))
			case pa && !sa:
				d = append(d, fmt.Sprintf("%s -> %s: %s allows it, the contract does not", from, to, protoName))
			}
		}
	}
	return d
}

// diffOrder reports two status lists that differ as lists.
func diffOrder(spec, proto []string, protoName string) []string {
	if slices.Equal(spec, proto) {
		return nil
	}
	d := sameSet(spec, proto, protoName)
	if len(d) == 0 {
		d = append(d, fmt.Sprintf("order differs: the contract lists %s, %s %s", ticked(spec), protoName, ticked(proto)))
	}
	return d
}

// jobTable: SPEC section 2's job table.
func jobTable(s doc, t Tables) Result {
	const table = "job statuses and transitions"
	lines, at, err := s.block(reJobTable, table)
	if err != nil {
		return unreadable(table, s.name, err)
	}
	order, next, err := transitionTable(lines, nil, at)
	if err != nil {
		return unreadable(table, s.name, err)
	}
	d := diffOrder(order, t.JobStatuses, "protocol.JobStatuses")
	d = append(d, diffTransitions(order, next, t.JobNext, "protocol.AssertJobTransition")...)
	for _, st := range order {
		if terminal := len(next[st]) == 0; terminal != t.JobTerminal[st] {
			d = append(d, fmt.Sprintf("`%s`: terminal in the contract is %v, JobStatus.Terminal() says %v", st, terminal, t.JobTerminal[st]))
		}
	}
	return Result{Table: table, Source: at, Contract: fmt.Sprintf("%d statuses, %d transitions", len(order), countNext(next)),
		Detail: strings.Join(d, "; ")}
}

func countNext(next map[string][]string) int {
	n := 0
	for _, tos := range next {
		n += len(tos)
	}
	return n
}

var reAttemptStatuses = regexp.MustCompile(`Attempt statuses:`)

// attemptClasses reads "Attempt statuses: `leased < ... < uploading` ...,
// then `committing`, then a terminal: `succeeded`, ...": the ranked lease
// phases, the other live status, the terminals.
func attemptClasses(s doc) (phases, live, terminal []string, at string, err error) {
	names, at, err := s.listAfter(reAttemptStatuses, '.', "attempt statuses")
	if err != nil {
		return nil, nil, nil, "", err
	}
	if len(names) < 3 || !strings.Contains(names[0], " < ") {
		return nil, nil, nil, "", fmt.Errorf("%s: want `phase < phase ...`, then the committing status, then the terminals; got %s", at, ticked(names))
	}
	for _, p := range strings.Split(names[0], "<") {
		phases = append(phases, strings.TrimSpace(p))
	}
	return phases, names[1:2], names[2:], at, nil
}

// attemptStatuses: the lease phases and their ranks, live and terminal.
func attemptStatuses(s doc, t Tables) Result {
	const table = "attempt statuses, phase ranks, live and terminal"
	phases, live, terminal, at, err := attemptClasses(s)
	if err != nil {
		return unreadable(table, s.name, err)
	}
	all := slices.Concat(phases, live, terminal)
	d := diffOrder(all, t.AttemptStatuses, "protocol.AttemptStatuses")
	for _, st := range all {
		rank := slices.Index(phases, st) + 1 // 0 when not a phase
		if t.PhaseRank[st] != rank {
			d = append(d, fmt.Sprintf("`%s`: rank %d in the contract, protocol.PhaseRank %d", st, rank, t.PhaseRank[st]))
		}
		if l := rank > 0 || slices.Contains(live, st); l != t.Live[st] {
			d = append(d, fmt.Sprintf("`%s`: live in the contract is %v, Live() says %v", st, l, t.Live[st]))
		}
		if term := slices.Contains(terminal, st); term != t.AttemptTerminal[st] {
			d = append(d, fmt.Sprintf("`%s`: terminal in the contract is %v, Terminal() says %v", st, term, t.AttemptTerminal[st]))
		}
	}
	return Result{Table: table, Source: at, Contract: fmt.Sprintf("phases %s; then %s; terminal %s",
		strings.Join(phases, " < "), ticked(live), ticked(terminal)), Detail: strings.Join(d, "; ")}
}

// attemptTable: SPEC section 2's attempt table ("terminal:" stands for the
// terminal statuses).
func attemptTable(s doc, t Tables) Result {
	const table = "attempt transitions"
	phases, live, terminal, _, err := attemptClasses(s)
	if err != nil {
		return unreadable(table, s.name, err)
	}
	lines, at, err := s.block(reAttemptStatuses, table)
	if err != nil {
		return unreadable(table, s.name, err)
	}
	_, next, err := transitionTable(lines, map[string][]string{"terminal": terminal}, at)
	if err != nil {
		return unreadable(table, s.name, err)
	}
	all := slices.Concat(phases, live, terminal)
	d := diffTransitions(all, next, t.AttemptNext, "protocol.AssertAttemptTransition")
	return Result{Table: table, Source: at, Contract: fmt.Sprintf("%d transitions", countNext(next)), Detail: strings.Join(d, "; ")}
}

var (
	reMaxAttempts        = regexp.MustCompile("`max_attempts` is an integer (\\d+)\\.\\.(\\d+)")
	reMaxAttemptsDefault = regexp.MustCompile(`max_attempts=(\d+)`)
)

// maxAttempts: "`max_attempts` is an integer 1..10" and CreateJob's default.
func maxAttempts(s doc, t Tables) Result {
	const table = "max_attempts bounds and default"
	m, err := s.find(reMaxAttempts, "the bounds of max_attempts")
	if err != nil {
		return unreadable(table, s.name, err)
	}
	dm, err := s.find(reMaxAttemptsDefault, "the default of max_attempts")
	if err != nil {
		return unreadable(table, s.name, err)
	}
	lo, _ := strconv.Atoi(s.text[m[2]:m[3]])
	hi, _ := strconv.Atoi(s.text[m[4]:m[5]])
	def, _ := strconv.Atoi(s.text[dm[2]:dm[3]])
	var d []string
	for _, c := range []struct {
		name       string
		spec, have int
	}{{"MaxAttemptsMin", lo, t.MaxAttemptsMin}, {"MaxAttemptsMax", hi, t.MaxAttemptsMax}, {"MaxAttemptsDefault", def, t.MaxAttemptsDefault}} {
		if c.spec != c.have {
			d = append(d, fmt.Sprintf("protocol.%s is %d, the contract says %d", c.name, c.have, c.spec))
		}
	}
	return Result{Table: table, Source: s.at(m[0]), Contract: fmt.Sprintf("%d..%d, default %d (%s)", lo, hi, def, s.at(dm[0])),
		Detail: strings.Join(d, "; ")}
}

var reToken = regexp.MustCompile(`\| commit token \|[^\n]*?(\d+) random bytes[^\n]*?base64url without padding[^\n]*?` +
	`lowercase hex SHA-256 of the plaintext string \((\d+) chars\)`)

// commitToken: SPEC section 1: "24 random bytes ..., base64url without
// padding; only commit_token_hash = lowercase hex SHA-256 of the plaintext
// string (64 chars) is stored". Checked on tokens protocol draws from known
// bytes: each must decode, as unpadded base64url, to exactly the bytes it
// was drawn from, and hash as stated.
func commitToken(s doc, t Tables) Result {
	const table = "commit token size, alphabet and hash"
	m, err := s.find(reToken, "the commit token's row (bytes, base64url without padding, hash length)")
	if err != nil {
		return unreadable(table, s.name, err)
	}
	n, _ := strconv.Atoi(s.text[m[2]:m[3]])
	hashLen, _ := strconv.Atoi(s.text[m[4]:m[5]])
	var d []string
	if t.TokenBytes != n {
		d = append(d, fmt.Sprintf("protocol.CommitTokenBytes is %d, the contract says %d", t.TokenBytes, n))
	}
	wantLen := base64.RawURLEncoding.EncodedLen(n)
	for i, tok := range t.Tokens {
		if p := tokenProblem(tok, n, wantLen, hashLen); p != "" {
			d = append(d, fmt.Sprintf("token %d of %d drawn by protocol.NewCommitToken (%q): %s", i+1, len(t.Tokens), tok.Plaintext, p))
			break // one token says it; the others would repeat it
		}
	}
	return Result{Table: table, Source: s.at(m[0]), Contract: fmt.Sprintf("%d bytes, base64url without padding (%d chars), hash %d lowercase hex", n, wantLen, hashLen),
		Detail: strings.Join(d, "; ")}
}

func tokenProblem(tok TokenSample, n, wantLen, hashLen int) string {
	raw, err := base64.RawURLEncoding.DecodeString(tok.Plaintext)
	sum := sha256.Sum256([]byte(tok.Plaintext))
	switch {
	case tok.Err != nil:
		return "draw failed: " + tok.Err.Error()
	case len(tok.Plaintext) != wantLen:
		return fmt.Sprintf("%d characters, want %d", len(tok.Plaintext), wantLen)
	case err != nil:
		return "not unpadded base64url: " + err.Error()
	case len(tok.Entropy) < n || !bytes.Equal(raw, tok.Entropy[:n]):
		return fmt.Sprintf("does not encode the %d random bytes it drew (%x)", n, tok.Entropy)
	case tok.Hash != hex.EncodeToString(sum[:]) || len(tok.Hash) != hashLen:
		return fmt.Sprintf("stored hash %q is not the %d-char lowercase hex SHA-256 of the plaintext", tok.Hash, hashLen)
	case !tok.ValidHash:
		return "protocol.ValidTokenHash refuses its hash"
	case !tok.Verifies:
		return "protocol.VerifyCommitToken refuses it against its own hash"
	}
	return ""
}

var reReadLimit = regexp.MustCompile(`read limit (\d+) KiB`)

// readLimit: SPEC section 5, "read limit 64 KiB (larger: close 1009)".
func readLimit(s doc, t Tables) Result {
	const table = "wire frame read limit"
	m, err := s.find(reReadLimit, "the wire's read limit")
	if err != nil {
		return unreadable(table, s.name, err)
	}
	kib, _ := strconv.Atoi(s.text[m[2]:m[3]])
	r := Result{Table: table, Source: s.at(m[0]), Contract: fmt.Sprintf("%d KiB", kib)}
	if t.ReadLimitBytes != kib<<10 {
		r.Detail = fmt.Sprintf("protocol.ReadLimitBytes is %d, the contract says %d KiB (%d)", t.ReadLimitBytes, kib, kib<<10)
	}
	return r
}

var reReasons = regexp.MustCompile("`lease_conflict` with a `reason`:")

// conflictReasons: SPEC section 3, Progress's lease_conflict reasons.
func conflictReasons(s doc, t Tables) Result {
	const table = "lease_conflict reasons"
	names, at, err := s.listAfter(reReasons, '.', table)
	if err != nil {
		return unreadable(table, s.name, err)
	}
	return Result{Table: table, Source: at, Contract: ticked(names),
		Detail: strings.Join(diffOrder(names, t.ConflictReasons, "protocol's Reason constants"), "; ")}
}

// replyCodes: every code protocol defines is named in the contract (as
// `code` or "code"), so a renamed constant is caught.
func replyCodes(s, m doc, t Tables) Result {
	const table = "reply and failure codes named"
	var d []string
	for _, c := range t.Codes {
		named := false
		for _, x := range []doc{s, m} {
			named = named || strings.Contains(x.text, "`"+c+"`") || strings.Contains(x.text, `"`+c+`"`)
		}
		if !named {
			d = append(d, fmt.Sprintf("protocol's code %q is named nowhere in %s or %s", c, s.name, m.name))
		}
	}
	return Result{Table: table, Source: s.name + ", " + m.name, Contract: fmt.Sprintf("%d codes and reasons of protocol", len(t.Codes)),
		Detail: strings.Join(d, "; ")}
}

var (
	reValidation      = regexp.MustCompile(`1\. Validation, in this order`)
	reIdempotencyStep = regexp.MustCompile(`\n2\. Idempotency`)
	reValidationField = regexp.MustCompile("-> `([a-z0-9_.]+)`(?: \\(Field `([a-z0-9_.]+)`\\))?")
)

// createJobFields: semantics.md, CreateJob step 1's order of checks.
func createJobFields(m doc, t Tables) Result {
	const table = "CreateJob validation order"
	start, err := m.find(reValidation, "CreateJob's validation order")
	if err != nil {
		return unreadable(table, m.name, err)
	}
	end := reIdempotencyStep.FindStringIndex(m.text[start[1]:])
	if end == nil {
		return unreadable(table, m.name, fmt.Errorf("%s: the validation step is not followed by \"2. Idempotency\"", m.at(start[0])))
	}
	var fields []string
	for _, sm := range reValidationField.FindAllStringSubmatch(m.text[start[1]:start[1]+end[0]], -1) {
		f := sm[1]
		if sm[2] != "" {
			f = sm[2] // "-> `not_found` (Field `buyer`)"
		}
		fields = append(fields, f)
	}
	return Result{Table: table, Source: m.at(start[0]), Contract: ticked(fields),
		Detail: strings.Join(diffOrder(fields, t.CreateJobFields, "protocol.CreateJobFields"), "; ")}
}

var reActors = regexp.MustCompile("`actor`\\s*\\(")

// actors: semantics.md, the journal's actor names.
func actors(m doc, t Tables) Result {
	const table = "journal actors"
	names, at, err := m.listAfter(reActors, ')', table)
	if err != nil {
		return unreadable(table, m.name, err)
	}
	return Result{Table: table, Source: at, Contract: ticked(names),
		Detail: strings.Join(sameSet(names, t.Actors, "protocol's Actor constants"), "; ")}
}

var reWindow = regexp.MustCompile(`admission window not in \[(\d+[smhd]), (\d+[smhd])\]`)

// admissionWindow: semantics.md, "admission window not in [1s, 7d]".
func admissionWindow(m doc, t Tables) Result {
	const table = "admission window bounds"
	sm, err := m.find(reWindow, "the admission window's bounds")
	if err != nil {
		return unreadable(table, m.name, err)
	}
	lo, hi := specDuration(m.text[sm[2]:sm[3]]), specDuration(m.text[sm[4]:sm[5]])
	var d []string
	if lo != t.AdmissionWindowMin {
		d = append(d, fmt.Sprintf("protocol.AdmissionWindowMin is %v, the contract says %v", t.AdmissionWindowMin, lo))
	}
	if hi != t.AdmissionWindowMax {
		d = append(d, fmt.Sprintf("protocol.AdmissionWindowMax is %v, the contract says %v", t.AdmissionWindowMax, hi))
	}
	return Result{Table: table, Source: m.at(sm[0]), Contract: fmt.Sprintf("[%s, %s]", m.text[sm[2]:sm[3]], m.text[sm[4]:sm[5]]), Detail: strings.Join(d, "; ")}
}

// specDuration reads "1s", "7d" (the regexp guarantees the form).
func specDuration(s string) time.Duration {
	n, _ := strconv.Atoi(s[:len(s)-1])
	unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[s[len(s)-1]]
	return time.Duration(n) * unit
}

// Base64URL is the alphabet of base64url (RFC 4648 section 5).
const Base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// TokenForm reads, from the contract's text, the form every commit token
// offered must have: its length in characters (the stated number of random
// bytes, base64url without padding) and its alphabet. Campaigns check the
// tokens the targets really offered against it, not against protocol's
// constant, which a wrong generator would carry too.
func TokenForm(spec string) (length int, alphabet string, err error) {
	s := doc{name: docs.SPECFile, text: spec}
	m, err := s.find(reToken, "the commit token's row (bytes, base64url without padding, hash length)")
	if err != nil {
		return 0, "", err
	}
	n, _ := strconv.Atoi(s.text[m[2]:m[3]])
	return base64.RawURLEncoding.EncodedLen(n), Base64URL, nil
}
