package console

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"time"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
)

// Actions are the service layer's operations the console's actions call
// (a *fencing.Service); each journals the operator it is given.
type Actions interface {
	CancelByOperator(ctx context.Context, now time.Time, operatorID, jobID string) (protocol.Reply, error)
	DrainDevice(ctx context.Context, now time.Time, operatorID, deviceID string) error
	RevokeDeviceByOperator(ctx context.Context, now time.Time, operatorID, deviceID string) error
}

// action is one console action: what its confirmation page says and what
// its POST does.
type action struct {
	// name is the path's last segment and the result's word.
	name, entity string
	// what and consequence are the confirmation page's words.
	what, consequence string
	do                func(c *Console, r *http.Request, operatorID, id string) (code string, err error)
}

var actions = []action{
	{name: "cancel", entity: "jobs", what: "Cancel job",
		consequence: "A queued job is cancelled at once and its hold released; a running one becomes cancelling, its device is told to stop, and the hold is released when the device answers or its lease expires. The buyer's webhook says cancelled.",
		do: func(c *Console, r *http.Request, op, id string) (string, error) {
			rep, err := c.cfg.Actions.CancelByOperator(r.Context(), clock.PinnedNow(c.cfg.Clock), op, id)
			if err != nil {
				return "", err
			}
			if rep.Code == protocol.CodeNotFound {
				return "", fencing.ErrNotFound
			}
			return string(rep.Code), nil
		}},
	{name: "drain", entity: "devices", what: "Drain device",
		consequence: "The device is offered no more jobs; its running attempts finish and commit, then its agent stops (as on a first SIGTERM). A device not connected now is drained when it next connects. Restart its agent to put it back in rotation.",
		do: func(c *Console, r *http.Request, op, id string) (string, error) {
			return "draining", c.cfg.Actions.DrainDevice(r.Context(), clock.PinnedNow(c.cfg.Clock), op, id)
		}},
	{name: "revoke", entity: "devices", what: "Revoke device",
		consequence: "The device's token stops working at once and for good: it is offered nothing more and cannot reconnect. Its running attempts end by commit, fail or lease expiry. Pair the Mac again to bring it back.",
		do: func(c *Console, r *http.Request, op, id string) (string, error) {
			return "revoked", c.cfg.Actions.RevokeDeviceByOperator(r.Context(), clock.PinnedNow(c.cfg.Clock), op, id)
		}},
}

// confirmView is an action's confirmation page.
type confirmView struct {
	What, Consequence string
	Entity, ID        string
	Action            string // the form's URL
	Back              string
	CSRF              string
	CSRFField         string
	ConfirmField      string
	ConfirmValue      string
}

func (c *Console) actionRoutes() {
	for _, a := range actions {
		path := Prefix + "/" + a.entity + "/{id}/" + a.name
		c.mux.Handle("GET "+path, c.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c.confirmPage(w, r, a)
		})))
		c.mux.Handle("POST "+path, c.Action(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c.runAction(w, r, a)
		})))
	}
}

// confirmPage is GET .../{id}/ACTION: what the action does, and the form
// that does it (its CSRF token and the confirm field). No JavaScript.
func (c *Console) confirmPage(w http.ResponseWriter, r *http.Request, a action) {
	id := r.PathValue("id")
	if !protocol.ValidID(id) {
		c.refuse(w, r, http.StatusNotFound, "no such "+a.entity[:len(a.entity)-1]+" "+id)
		return
	}
	back := Prefix + "/" + a.entity + "/" + id
	c.render(w, r, http.StatusOK, "confirm", view{Title: a.what + " " + id, Nav: a.entity, Data: confirmView{
		What: a.what, Consequence: a.consequence, Entity: a.entity[:len(a.entity)-1], ID: id,
		Action: back + "/" + a.name, Back: back, CSRF: c.CSRFToken(r),
		CSRFField: CSRFField, ConfirmField: ConfirmField, ConfirmValue: ConfirmValue}})
}

// runAction is POST .../{id}/ACTION after Action's checks: the service
// layer acts, journalling the operator, and the browser goes back to the
// entity's page with the outcome (JSON {"code"} for a client that asks).
func (c *Console) runAction(w http.ResponseWriter, r *http.Request, a action) {
	id := r.PathValue("id")
	if c.cfg.Actions == nil {
		c.refuse(w, r, http.StatusServiceUnavailable, "this console has no service layer to act through")
		return
	}
	code, err := a.do(c, r, OperatorID(r), id)
	switch {
	case errors.Is(err, fencing.ErrNotFound) || (err == nil && !protocol.ValidID(id)):
		c.refuse(w, r, http.StatusNotFound, "no such "+a.entity[:len(a.entity)-1]+" "+id)
		return
	case errors.Is(err, fencing.ErrDeviceRevoked):
		c.refuseCode(w, r, http.StatusConflict, "device_revoked", "device "+id+" is revoked: nothing to "+a.name)
		return
	case err != nil:
		c.internal(w, r, err)
		return
	case code == string(protocol.CodeJobTerminal):
		c.refuseCode(w, r, http.StatusConflict, code, "job "+id+" has ended: nothing to cancel")
		return
	}
	c.log.InfoContext(r.Context(), "console action", "action", a.name, a.entity[:len(a.entity)-1], id,
		"operator_id", OperatorID(r), "code", code)
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"code":"` + code + `"}` + "\n"))
		return
	}
	http.Redirect(w, r, Prefix+"/"+a.entity+"/"+id+"?done="+a.name+"&code="+code, http.StatusSeeOther)
}

// flashWord is what a done/code query may hold: the page shows it, so it
// is held to words, never text an attacker could phrase.
var flashWord = regexp.MustCompile(`^[a-z_]{1,32}$`)

// flash is the outcome line of an action the page was redirected from.
func flash(r *http.Request) string {
	q := r.URL.Query()
	done, code := q.Get("done"), q.Get("code")
	if !flashWord.MatchString(done) || !flashWord.MatchString(code) {
		return ""
	}
	return done + ": " + code
}
