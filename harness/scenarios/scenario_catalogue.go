package scenarios

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
)

// The service catalogue in scripts: files loaded as the server and the
// agents load them at start (`catalogue`), and a service's declared params
// sent at create as the JSON values the API takes for them (create raw=).
// The files are testdata/catalogues (verifyFiles, scenario_verify.go).

func init() {
	scCommands["catalogue"] = cmdCatalogue
}

// catalogueFile returns the catalogue testdata/catalogues/NAME.json or, for
// FILE#CASE, the entry CASE of the object in FILE.json.
func catalogueFile(ref string) ([]byte, error) {
	file, entry, nested := strings.Cut(ref, "#")
	data, err := verifyFiles.ReadFile("testdata/catalogues/" + file + ".json")
	if err != nil || !nested {
		return data, err
	}
	var cases map[string]json.RawMessage
	if err := json.Unmarshal(data, &cases); err != nil {
		return nil, fmt.Errorf("%s.json: %w", file, err)
	}
	c, ok := cases[entry]
	if !ok {
		return nil, fmt.Errorf("%s.json has no case %q", file, entry)
	}
	return c, nil
}

// cmdCatalogue loads a catalogue (testdata/catalogues/FILE.json, or the
// case CASE of it as FILE#CASE) as the server and every agent do at start
// (protocol.ParseCatalogue behind --catalogue) and checks that it is taken
// (`-> ok`, with services=N) or refused (`-> refused`) with the error naming
// index=, service= and field=, its message holding each has= word. With
// `agent`, it then builds the runners of the services= an agent offers
// (runner.ForServices, as `rendermac agent` does before it connects); kind=
// SERVICE:KIND first gives a service a runner kind this agent lacks (one a
// newer catalogue could name).
// Example: catalogue load cases#transcode_vp9 -> refused index=0 service=transcode.hevc_720p field=runner.codec has=vp9
// Example: catalogue agent verify services=verify.h264,nope.x -> refused has=nope.x
func cmdCatalogue(r *scRun, st scStep) error {
	verb, ref := arg(st, 0), arg(st, 1)
	if (verb != "load" && verb != "agent") || ref == "" || len(st.arrow) == 0 {
		return errors.New("want: catalogue load|agent FILE[#CASE] [services=S,...] [kind=SERVICE:KIND] -> ok|refused [WORDS]")
	}
	data, err := catalogueFile(ref)
	if err != nil {
		return err
	}
	cat, err := protocol.ParseCatalogue(data)
	got := fmt.Sprintf("ok services=%d", len(cat))
	if err == nil && verb == "agent" {
		got, err = r.agentRunners(cat, st)
	}
	if err != nil {
		got = "refused: " + err.Error()
	}
	r.tl.add(laneGateway, fmt.Sprintf("catalogue %s %s: %s", verb, ref, got))
	if err := checkCatalogueOutcome(st.arrow, got, err); err != nil {
		return fmt.Errorf("catalogue %s %s: %w", verb, ref, err)
	}
	if err != nil {
		r.count("catalogue.refused", 1)
	} else {
		r.count("catalogue.taken", 1)
	}
	return nil
}

// agentRunners is what an agent offering st's services= builds from cat.
func (r *scRun) agentRunners(cat []protocol.Service, st scStep) (string, error) {
	if k := st.opt("kind", ""); k != "" {
		name, kind, _ := strings.Cut(k, ":")
		i := slices.IndexFunc(cat, func(s protocol.Service) bool { return s.Name == name })
		if i < 0 || kind == "" {
			return "", fmt.Errorf("kind=%s: want SERVICE:KIND of a service in the catalogue", k)
		}
		cat = slices.Clone(cat)
		cat[i].Runner = protocol.RunnerSpec{Kind: kind}
	}
	rs, err := runner.ForServices(cat, strings.Split(st.opt("services", ""), ","), runner.Env{Clock: clock.Real{}})
	return fmt.Sprintf("ok runners=%d", len(rs)), err
}

// checkCatalogueOutcome holds a catalogue step's outcome to its `->` words.
func checkCatalogueOutcome(want []string, got string, err error) error {
	switch {
	case want[0] == "ok" && err != nil:
		return fmt.Errorf("want it taken, got %s", got)
	case want[0] == "ok":
		for _, w := range want[1:] {
			if !slices.Contains(strings.Fields(got), w) {
				return fmt.Errorf("want %s, got %s", w, got)
			}
		}
		return nil
	case want[0] != "refused":
		return fmt.Errorf("want ok or refused after ->, got %q", want[0])
	case err == nil:
		return fmt.Errorf("want it refused, got %s", got)
	}
	var ce *protocol.CatalogueError
	isCat := errors.As(err, &ce)
	for _, w := range want[1:] {
		k, v, _ := strings.Cut(w, "=")
		var ok bool
		switch k {
		case "has":
			ok = strings.Contains(err.Error(), v)
		case "index":
			ok = isCat && strconv.Itoa(ce.Index) == v && strings.Contains(err.Error(), "services["+v+"]")
		case "service":
			ok = isCat && ce.Service == v && strings.Contains(err.Error(), strconv.Quote(v))
		case "field":
			ok = isCat && ce.Field == v && strings.Contains(err.Error(), ": "+v+": ")
		default:
			return fmt.Errorf("unknown outcome word %q (index=, service=, field=, has=)", w)
		}
		if !ok {
			return fmt.Errorf("want the refusal to name %s, got %s", w, got)
		}
	}
	return nil
}

// createJobRaw is POST /v1/jobs with req's params as JSON strings and raw's
// values as the JSON literals they are (numbers, booleans), which the API
// takes for params the service declares of those types.
func (r *scRun) createJobRaw(base string, req client.CreateRequest, raw map[string]string) (int, buyer.JobDetail, error) {
	body, err := json.Marshal(struct {
		Service          string `json:"service"`
		Input            []byte `json:"input_base64,omitempty"`
		InputID          string `json:"input_id,omitempty"`
		MaxAttempts      *int   `json:"max_attempts,omitempty"`
		AdmissionWindowS *int64 `json:"admission_window_s,omitempty"`
	}{req.Service, req.Input, req.InputID, req.MaxAttempts, req.AdmissionWindowS})
	if err != nil {
		return 0, buyer.JobDetail{}, err
	}
	params := map[string]json.RawMessage{}
	for k, v := range req.Params {
		params[k], _ = json.Marshal(v)
	}
	for k, v := range raw {
		params[k] = json.RawMessage(v)
	}
	enc, err := json.Marshal(params)
	if err != nil {
		return 0, buyer.JobDetail{}, fmt.Errorf("raw params %v: %w", raw, err)
	}
	body = append(append(append(body[:len(body)-1], `,"params":`...), enc...), '}')
	hr, err := http.NewRequestWithContext(r.ctx, http.MethodPost, base+"/v1/jobs", bytes.NewReader(body))
	if err != nil {
		return 0, buyer.JobDetail{}, err
	}
	hr.Header.Set("Authorization", "Bearer "+r.apiKey)
	hr.Header.Set("Content-Type", "application/json")
	resp, err := r.httpc.Do(hr)
	if err != nil {
		return 0, buyer.JobDetail{}, err
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, buyer.JobDetail{}, err
	}
	if resp.StatusCode != http.StatusCreated {
		se := &client.Error{Method: http.MethodPost, Path: "/v1/jobs", Status: resp.StatusCode, Body: reply}
		var e buyer.Error
		if json.Unmarshal(reply, &e) == nil { // a refusal without a JSON body has no code
			se.Code, se.Message, se.Field = e.Code, e.Message, e.Field
		}
		return resp.StatusCode, buyer.JobDetail{}, se
	}
	var job buyer.JobDetail
	if err := json.Unmarshal(reply, &job); err != nil {
		return resp.StatusCode, job, fmt.Errorf("POST /v1/jobs: bad body %q: %w", reply, err)
	}
	return resp.StatusCode, job, nil
}

// splitParams reads `k=v,k2=v2` (an option's value) into a map.
func splitParams(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("params: want k=v,..., got %q", s)
		}
		out[k] = v
	}
	return out, nil
}
