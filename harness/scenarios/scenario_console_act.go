package scenarios

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/rendermac/rendermac/server/console"
)

// csrfInput finds the CSRF token in an action's confirmation form.
var csrfInput = regexp.MustCompile(`name="` + console.CSRFField + `" value="([A-Za-z0-9_-]*)"`)

// consoleAct is `console act ACTION TARGET ...` (see cmdConsole).
func (r *scRun) consoleAct(st scStep) error {
	act, target := arg(st, 1), arg(st, 2)
	if target == "" || len(st.arrow) < 1 {
		return errors.New("want: console act cancel|drain|revoke TARGET [as=WHO] [csrf=page|none|cookie:NAME] [confirm=no] -> STATUS [CODE]")
	}
	var entity, id string
	switch act {
	case "cancel":
		jid, err := r.jobID(target)
		if err != nil {
			return err
		}
		entity, id = "jobs", jid
	case "drain", "revoke":
		entity = "devices"
		if a := r.agents[target]; a != nil {
			id = a.deviceID
		} else if a := r.real[target]; a != nil {
			id = a.deviceID
		} else {
			return fmt.Errorf("console act %s: no agent %s", act, target)
		}
	default:
		return fmt.Errorf("console act: unknown action %q (cancel, drain, revoke)", act)
	}
	base, err := r.baseURL(st)
	if err != nil {
		return err
	}
	path := base + console.Prefix + "/" + entity + "/" + id + "/" + act
	who := st.opt("as", "")
	token := ""
	switch src := st.opt("csrf", "page"); {
	case src == "page":
		if token, err = r.consoleCSRF(path, who, st.opt("from", "")); err != nil {
			return err
		}
	case strings.HasPrefix(src, "cookie:"):
		if token, err = r.consoleCSRF(path, src, st.opt("from", "")); err != nil {
			return err
		}
		if token == "" {
			return fmt.Errorf("console act: csrf=%s: that session's confirmation page held no token", src)
		}
	case src != "none":
		return fmt.Errorf("console act: csrf=%q: want page, none or cookie:NAME", src)
	}
	form := url.Values{}
	if token != "" {
		form.Set(console.CSRFField, token)
	}
	if st.opt("confirm", "yes") == "yes" {
		form.Set(console.ConfirmField, console.ConfirmValue)
	}
	bearer, cookie, err := r.secretFor(who)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(r.ctx, http.MethodPost, path, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	present(req, bearer, cookie)
	before, err := r.operatorRows()
	if err != nil {
		return err
	}
	var rep scReply
	send := func() error {
		rep, err = r.do(req, st.opt("from", ""))
		return err
	}
	what := fmt.Sprintf("console act %s %s as %s (csrf=%s)", act, target, orDash(who), st.opt("csrf", "page"))
	if st.arrow[0] != "200" {
		err = r.unchanged(what, send)
	} else {
		err = send()
	}
	if err != nil {
		return err
	}
	r.tl.add(laneAgent, fmt.Sprintf("%s: %d %s", what, rep.status, rep.code))
	r.reply(fmt.Sprintf("console act %s %s -> %d %s", act, target, rep.status, rep.code))
	if err := r.judge(rep, st.arrow); err != nil {
		return fmt.Errorf("%s: want %s: %w", what, strings.Join(st.arrow, " "), err)
	}
	after, err := r.operatorRows()
	if err != nil {
		return err
	}
	if st.arrow[0] != "200" {
		if after != before {
			return fmt.Errorf("%s: refused, yet operator journal rows were written: %d -> %d", what, before, after)
		}
		return nil
	}
	return r.checkOperatorJournal(what, act, id, who)
}

// consoleCSRF GETs an action's confirmation page as who and returns the
// form's token ("" when the page is refused or holds none).
func (r *scRun) consoleCSRF(path, who, from string) (string, error) {
	bearer, cookie, err := r.secretFor(who)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, path, nil)
	if err != nil {
		return "", err
	}
	present(req, bearer, cookie)
	rep, err := r.do(req, from)
	if err != nil {
		return "", err
	}
	if rep.status != http.StatusOK {
		return "", nil
	}
	m := csrfInput.FindSubmatch(rep.body)
	if m == nil {
		return "", fmt.Errorf("confirmation page %s as %s: no CSRF field in the form", path, who)
	}
	return string(m[1]), nil
}

// operatorRows counts the journal rows operators caused, jobs' and devices'.
func (r *scRun) operatorRows() (int, error) {
	var n int
	err := r.observer.QueryRow(r.ctx, `
SELECT (SELECT count(*) FROM job_events WHERE actor = 'operator') + (SELECT count(*) FROM device_events)`).Scan(&n)
	return n, err
}

// checkOperatorJournal requires the action's journal row: the actor
// operator, naming the operator who (operator:NAME or cookie:NAME) is.
func (r *scRun) checkOperatorJournal(what, act, id, who string) error {
	_, name, _ := strings.Cut(who, ":")
	op := r.opsState().operators[name]
	if op == nil {
		return fmt.Errorf("%s: as=%s names no operator of the run; a 200 needs one", what, who)
	}
	var q string
	switch act {
	case "cancel":
		q = `SELECT count(*) FROM job_events WHERE job_id = $1 AND actor = 'operator' AND operator_id = $2 AND kind = 'job'
  AND to_status IN ('cancelling', 'cancelled')`
	default:
		q = `SELECT count(*) FROM device_events WHERE device_id = $1 AND actor = 'operator' AND operator_id = $2 AND action = '` + act + `'`
	}
	var n int
	if err := r.observer.QueryRow(r.ctx, q, id, op.id).Scan(&n); err != nil {
		return fmt.Errorf("%s: read its journal row: %w", what, err)
	}
	if n == 0 {
		var got string
		_ = r.observer.QueryRow(r.ctx, `SELECT coalesce(string_agg(actor || ' ' || coalesce(operator_id::text, '-') || ' ' || to_status, ', ' ORDER BY id), '') FROM job_events WHERE job_id::text = $1`, id).Scan(&got)
		return fmt.Errorf("%s: no journal row with the actor operator naming %s (%s); job journal: %s", what, name, op.id, got)
	}
	r.count("console.action", 1)
	return nil
}
