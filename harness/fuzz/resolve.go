package fuzz

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// OutputFunc tells the harness what output an attempt uploads: a target with
// a real artifact store writes exactly that object before transaction 1.
type OutputFunc func(jobID, attemptID string) protocol.Output

// HashOutput is the default OutputFunc for targets without a store.
func HashOutput(jobID, attemptID string) protocol.Output {
	sum := sha256.Sum256([]byte(attemptID))
	return protocol.Output{Key: protocol.OutputKey(jobID, attemptID), Bytes: 4096, SHA256: hex.EncodeToString(sum[:])}
}

// inputSHA256 is the sha256 every generated job declares for its input.
const inputSHA256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

type attemptRef struct {
	id, device, token string
	number, epoch     int
	// phase is the last lease phase the attempt reported successfully.
	phase protocol.AttemptStatus
}

type jobRef struct {
	id, buyer string
	attempts  []attemptRef
}

// view is what the harness knows of the identities handed out so far: the
// same for every target of a run, because their replies are compared equal.
type view struct {
	now time.Time
	// jobs are ordered most recently leased first, then never-leased jobs in
	// creation order, so that small job indexes in events aim at the jobs
	// where the action is (aim puts those with a live attempt first).
	jobs    []*jobRef
	byID    map[string]*jobRef
	garbage *rand.ChaCha8
	// aimed is the order a step's job indexes resolve in (aim): the jobs
	// with a live attempt first, then the others, each in recency order.
	aimed []*jobRef
}

func newView(seed uint64) *view {
	var k [32]byte
	for i := 0; i < 8; i++ {
		k[i] = byte(seed >> (8 * i))
	}
	k[31] = 9
	return &view{now: Epoch, byID: map[string]*jobRef{}, garbage: rand.NewChaCha8(k)}
}

func (v *view) junkID() string { return protocol.UUIDFrom(v.garbage) }

func (v *view) junkToken() string {
	tok, _, err := protocol.NewCommitToken(v.garbage)
	if err != nil {
		panic(err) // ChaCha8 never fails to read
	}
	return tok
}

func (v *view) createRequest(ev Event) protocol.CreateJobRequest {
	req := protocol.CreateJobRequest{
		BuyerID:         WorldBuyers[ev.Buyer%len(WorldBuyers)].ID,
		Service:         ev.Service,
		Params:          createParams(ev.Service, ev.Param),
		Input:           protocol.InputRef{Bytes: 4096, SHA256: inputSHA256},
		MaxAttempts:     ev.MaxAttempts,
		AdmissionWindow: time.Duration(ev.WindowSec) * time.Second,
	}
	if ev.IdemKey > 0 {
		req.IdempotencyKey = "key-" + strconv.Itoa(ev.IdemKey)
	}
	return req
}

// learn records identities a reply handed out; buyer and device are the
// actor of the step.
func (v *view) learn(r protocol.Reply, buyer, device string) {
	switch r.Code {
	case protocol.CodeCreated:
		if !r.Existing {
			j := &jobRef{id: r.JobID, buyer: buyer}
			v.byID[j.id] = j
			v.jobs = append(v.jobs, j) // behind the leased ones until it is leased

		}
	case protocol.CodeLeaseOffer:
		if j := v.byID[r.JobID]; j != nil {
			j.attempts = append(j.attempts, attemptRef{id: r.AttemptID, device: device, token: r.CommitToken,
				number: r.AttemptNumber, epoch: r.LeaseEpoch, phase: protocol.AttemptLeased})
			v.touch(j)
		}
	}
}

// learnPhase records an accepted progress phase.
func (v *view) learnPhase(r protocol.Reply, phase protocol.AttemptStatus) {
	if j := v.byID[r.JobID]; j != nil && r.Code == protocol.CodeProgressOK {
		for i := range j.attempts {
			if j.attempts[i].id == r.AttemptID {
				j.attempts[i].phase = phase
			}
		}
	}
}

// touch moves j to the front of the recency order.
func (v *view) touch(j *jobRef) {
	for i, x := range v.jobs {
		if x == j {
			copy(v.jobs[1:i+1], v.jobs[:i])
			v.jobs[0] = j
			return
		}
	}
	v.jobs = append([]*jobRef{j}, v.jobs...)
}

// nextPhase is the phase after the attempt's last reported one.
func (v *view) nextPhase(ev Event) protocol.AttemptStatus {
	if ev.Phase != "" {
		return ev.Phase
	}
	j := v.job(ev.Job)
	if j == nil || len(j.attempts) == 0 {
		return protocol.AttemptDownloading
	}
	a := j.attempts[max(len(j.attempts)-1-ev.Attempt, 0)]
	rank := min(protocol.PhaseRank(a.phase)+1, protocol.PhaseRank(protocol.AttemptUploading))
	return phases[rank-1]
}

func (v *view) job(i int) *jobRef {
	if len(v.aimed) == 0 {
		return nil
	}
	return v.aimed[i%len(v.aimed)]
}

// aim fixes, before a step is applied to any target, the order its job
// index resolves in: jobs whose latest attempt is live (as live says: the
// reference target, whose state every other target's equals) first, so that
// most fenced frames reach an attempt that can still answer something other
// than a conflict; then the rest. Both parts keep the recency order. With
// no live, the order is recency alone.
func (v *view) aim(live LiveAttempts) {
	v.aimed = v.aimed[:0]
	if live == nil {
		v.aimed = append(v.aimed, v.jobs...)
		return
	}
	rest := make([]*jobRef, 0, len(v.jobs))
	for _, j := range v.jobs {
		if len(j.attempts) == 0 {
			rest = append(rest, j)
			continue
		}
		if row, ok := live.LiveAttempt(j.id); ok && row.ID == j.attempts[len(j.attempts)-1].id {
			v.aimed = append(v.aimed, j)
		} else {
			rest = append(rest, j)
		}
	}
	v.aimed = append(v.aimed, rest...)
}

// fence is the identity a fenced frame presents.
type fence struct {
	jobID, attemptID, device, token string
	epoch                           int
}

func (v *view) fence(ev Event) fence {
	f := fence{device: WorldDevices[0].ID, epoch: 1 + ev.Epoch}
	if ev.Device >= 0 {
		f.device = WorldDevices[ev.Device%len(WorldDevices)].ID
	}
	j := v.job(ev.Job)
	if j == nil {
		f.jobID, f.attemptID, f.token = v.junkID(), v.junkID(), v.junkToken()
		return f
	}
	f.jobID = j.id
	if len(j.attempts) == 0 {
		f.attemptID, f.token = v.junkID(), v.junkToken()
		return f
	}
	idx := max(len(j.attempts)-1-ev.Attempt, 0)
	a := j.attempts[idx]
	f.attemptID, f.epoch = a.id, a.epoch+ev.Epoch
	if ev.Device < 0 {
		f.device = a.device
	}
	switch ev.Token {
	case TokenRight:
		f.token = a.token
	case TokenWrong:
		f.token = v.junkToken()
	case TokenStale:
		f.token = v.junkToken()
		if idx > 0 {
			f.token = j.attempts[idx-1].token
		}
	}
	return f
}

// Param values past the usual seeds: text Postgres cannot store.
const (
	paramNUL         = 3 // a NUL byte
	paramInvalidUTF8 = 4 // a byte sequence that is not UTF-8
)

// createParams is a create's one param: a string param the service
// declares (every key must be declared), with the event's value; a value
// Postgres cannot store stays one, and an enum's value is drawn from its
// list. A service the catalogue lacks gets seed, refused for the service.
func createParams(service string, p int) map[string]string {
	svc, _ := protocol.LookupService(service)
	key, v := "seed", paramValue(p)
	for _, spec := range svc.Params {
		if spec.Type != protocol.ParamString {
			continue
		}
		key = spec.Name
		if len(spec.Enum) > 0 && p != paramNUL && p != paramInvalidUTF8 {
			v = spec.Enum[p%len(spec.Enum)]
		}
		if len(spec.Enum) == 0 {
			break // a free string param is the best fit
		}
	}
	return map[string]string{key: v}
}

func paramValue(p int) string {
	switch p {
	case paramNUL:
		return "se\x00ed"
	case paramInvalidUTF8:
		return "se\xffed"
	}
	return strconv.Itoa(p)
}
