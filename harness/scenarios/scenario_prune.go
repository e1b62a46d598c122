package scenarios

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
)

// Retention's commands (docs/semantics.md, "Retention"):
//
//	prune older=1h -> jobs=1       PruneFinished on gw1's service, bound at
//	                               the pinned clock less older, batches of 1
//	prune older=0s as=p1 async     the same in the background
//	pruned p1 -> jobs=1            await a background prune and check it
//	link j1 as=d1                  the buyer reads j1 and keeps its download URL
//	fetch d1 -> uploaded           download it: uploaded (the accepted
//	                               upload's bytes, whole) or 404
//	gone j1                        the buyer's GET of j1 answers 404 not_found
//	stored j1 output -> absent     the store holds (present) or lacks
//	                               (absent) j1's input or its succeeded
//	                               attempt's output (the served key)

func init() {
	scCommands["prune"] = cmdPrune
	scCommands["pruned"] = cmdPruned
	scCommands["link"] = cmdLink
	scCommands["fetch"] = cmdFetch
	scCommands["gone"] = cmdGone
	scCommands["stored"] = cmdStored
}

func cmdPrune(r *scRun, st scStep) error {
	gw, err := r.stack(st.opt("via", "gw1"))
	if err != nil {
		return err
	}
	older, err := time.ParseDuration(st.opt("older", ""))
	if err != nil || older < 0 {
		return fmt.Errorf("prune: want older=DURATION (0s or more), got %q", st.opt("older", ""))
	}
	bound := r.clock.Now().Add(-older)
	run := func() (string, error) {
		res, err := gw.svc.PruneFinished(r.ctx, bound, 1)
		r.tl.add(laneGateway, fmt.Sprintf("%s prune of jobs finished before %s: %+v", gw.name, bound.Format(time.RFC3339), res))
		r.count("prune.jobs", res.Jobs)
		r.count("prune.objects", res.Objects)
		return "jobs=" + strconv.FormatInt(res.Jobs, 10), err
	}
	if st.opt("as", "") != "" || slicesHas(st.args, "async") {
		name := st.opt("as", "")
		if name == "" {
			return errors.New("prune: async needs as=NAME")
		}
		return r.background(name, "prune older="+older.String(), run)
	}
	got, err := run()
	if err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	r.reply("prune -> " + got)
	if want := strings.Join(st.arrow, " "); want != "" && want != got {
		return fmt.Errorf("prune: want %s, got %s", want, got)
	}
	return nil
}

func slicesHas(words []string, w string) bool {
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}

func cmdPruned(r *scRun, st scStep) error { return r.outcome(st) }

// scLink is a download URL a buyer kept, and the bytes it should serve.
type scLink struct {
	url string
	up  protocol.Output
}

func cmdLink(r *scRun, st scStep) error {
	name := st.opt("as", "")
	if name == "" {
		return errors.New("want: link JOB as=NAME")
	}
	id, err := r.jobID(arg(st, 0))
	if err != nil {
		return err
	}
	gw, err := r.stack(st.opt("via", "gw1"))
	if err != nil {
		return err
	}
	d, err := r.buyer(gw.baseURL(), r.apiKey).Get(r.ctx, id)
	if err != nil {
		return fmt.Errorf("link: GET job %s: %w", arg(st, 0), err)
	}
	if d.Output == nil {
		return fmt.Errorf("link: job %s (%s) offers no output", arg(st, 0), d.Status)
	}
	var up protocol.Output
	r.mu.Lock()
	for _, a := range d.Attempts {
		if a.Status == protocol.AttemptSucceeded {
			up = r.outputs[a.ID]
		}
	}
	if r.kept == nil {
		r.kept = map[string]scLink{}
	}
	r.kept[name] = scLink{url: d.Output.DownloadURL, up: up}
	r.mu.Unlock()
	r.tl.add(laneGateway, fmt.Sprintf("buyer read job %s and kept its download URL as %s", arg(st, 0), name))
	return nil
}

func cmdFetch(r *scRun, st scStep) error {
	name := arg(st, 0)
	r.mu.Lock()
	l, ok := r.kept[name]
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("fetch: no link kept as %q", name)
	}
	want := strings.Join(st.arrow, " ")
	if want != "uploaded" && want != "404" {
		return errors.New("want: fetch NAME -> uploaded|404")
	}
	got, err := r.download(l.url)
	switch {
	case err != nil && strings.Contains(err.Error(), "HTTP 404"):
		r.tl.add(laneGateway, "buyer download "+name+": 404")
		r.reply("fetch " + name + " -> 404")
		if want != "404" {
			return fmt.Errorf("fetch %s: want the uploaded bytes, got %v", name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("fetch %s: %w", name, err)
	}
	r.tl.add(laneGateway, fmt.Sprintf("buyer download %s: %d bytes sha256 %.12s", name, got.Bytes, got.SHA256))
	if got.Bytes != l.up.Bytes || got.SHA256 != l.up.SHA256 {
		return fmt.Errorf("fetch %s: served %d bytes sha256 %s, the accepted upload was %d bytes sha256 %s",
			name, got.Bytes, got.SHA256, l.up.Bytes, l.up.SHA256)
	}
	r.reply("fetch " + name + " -> uploaded")
	if want != "uploaded" {
		return fmt.Errorf("fetch %s: want 404, got the whole output", name)
	}
	return nil
}

func cmdGone(r *scRun, st scStep) error {
	id, err := r.jobID(arg(st, 0))
	if err != nil {
		return err
	}
	gw, err := r.stack(st.opt("via", "gw1"))
	if err != nil {
		return err
	}
	d, err := r.buyer(gw.baseURL(), r.apiKey).Get(r.ctx, id)
	var se *client.Error
	if !errors.As(err, &se) || se.Status != 404 {
		return fmt.Errorf("gone: GET job %s: want 404, got %s (%v)", arg(st, 0), d.Status, err)
	}
	r.reply("gone " + arg(st, 0))
	return nil
}

// cmdStored looks at the store itself, past injected faults.
func cmdStored(r *scRun, st scStep) error {
	id, err := r.jobID(arg(st, 0))
	if err != nil {
		return err
	}
	want := strings.Join(st.arrow, " ")
	if want != "present" && want != "absent" {
		return errors.New("want: stored JOB input|output -> present|absent")
	}
	var keys []string
	switch arg(st, 1) {
	case "input":
		keys = []string{protocol.InputKey(id)}
	case "output":
		r.mu.Lock()
		for _, o := range r.outputs {
			if strings.HasPrefix(o.Key, "outputs/"+id+"/") {
				keys = append(keys, artifact.ServedKey(r.checked(), o.Key))
			}
		}
		r.mu.Unlock()
		if len(keys) == 0 {
			return fmt.Errorf("stored: job %s has no accepted upload", arg(st, 0))
		}
	default:
		return errors.New("want: stored JOB input|output -> present|absent")
	}
	for _, k := range keys {
		_, err := r.checked().Stat(r.ctx, k)
		switch {
		case errors.Is(err, artifact.ErrNotFound):
			if want == "present" {
				return fmt.Errorf("stored: %s: no object", k)
			}
		case err != nil:
			return fmt.Errorf("stored: %s: %w", k, err)
		case want == "absent":
			return fmt.Errorf("stored: %s: the object is still there", k)
		}
	}
	r.tl.add(laneGateway, fmt.Sprintf("store: %s %s of %s", want, arg(st, 1), arg(st, 0)))
	r.reply("stored " + arg(st, 0) + " " + arg(st, 1) + " -> " + want)
	return nil
}
