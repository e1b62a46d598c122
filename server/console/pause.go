package console

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
)

// ServicePauser is what the services page needs of the service layer
// (fencing.Service): the catalogue, which services are paused, and the
// operator's pause and resume (SPEC section 3, "Pausing a service").
type ServicePauser interface {
	Services() []protocol.Service
	PausedServices(ctx context.Context) ([]string, error)
	PauseService(ctx context.Context, now time.Time, operatorID, service string) (protocol.Reply, error)
	ResumeService(ctx context.Context, now time.Time, operatorID, service string) (protocol.Reply, error)
}

// ServiceState is one row of the services page.
type ServiceState struct {
	Name       string
	PriceCents int64
	Paused     bool
}

// servicesView is the services page and its confirmation step.
type servicesView struct {
	Services []ServiceState
	// Confirm: the service and action (pause or resume) asked about, and
	// the form's token.
	Service, Action, CSRF string
}

// serviceRoutes adds the services page, the confirmation of a pause or
// resume (GET) and the action itself (POST, with the CSRF token).
func (c *Console) serviceRoutes(page func(string, http.HandlerFunc)) {
	page("GET "+Prefix+"/services", c.servicesPage)
	page("GET "+Prefix+"/services/{name}/{action}", c.serviceConfirm)
	c.mux.Handle("POST "+Prefix+"/services/{name}/{action}", c.Action(http.HandlerFunc(c.serviceAction)))
}

func (c *Console) servicesPage(w http.ResponseWriter, r *http.Request) {
	v := servicesView{}
	if c.cfg.Pauser != nil {
		paused, err := c.cfg.Pauser.PausedServices(r.Context())
		if err != nil {
			c.internal(w, r, err)
			return
		}
		for _, s := range c.cfg.Pauser.Services() {
			v.Services = append(v.Services, ServiceState{Name: s.Name, PriceCents: s.PriceCents, Paused: slices.Contains(paused, s.Name)})
		}
	}
	c.render(w, r, http.StatusOK, "services", view{Title: "Services", Nav: "services", Message: r.URL.Query().Get("done"), Data: v})
}

// serviceTarget resolves the path's service and action, refusing a service
// the catalogue lacks or an action other than pause and resume (404).
func (c *Console) serviceTarget(w http.ResponseWriter, r *http.Request) (name, action string, ok bool) {
	name, action = r.PathValue("name"), r.PathValue("action")
	if c.cfg.Pauser == nil || (action != "pause" && action != "resume") ||
		!slices.ContainsFunc(c.cfg.Pauser.Services(), func(s protocol.Service) bool { return s.Name == name }) {
		c.refuse(w, r, http.StatusNotFound, "no such service or action")
		return "", "", false
	}
	return name, action, true
}

// serviceConfirm is the confirmation step: what the action does, and a
// form that POSTs it with the session's CSRF token.
func (c *Console) serviceConfirm(w http.ResponseWriter, r *http.Request) {
	name, action, ok := c.serviceTarget(w, r)
	if !ok {
		return
	}
	c.render(w, r, http.StatusOK, "service_confirm", view{Title: "Confirm " + action, Nav: "services",
		Data: servicesView{Service: name, Action: action, CSRF: c.CSRFToken(r)}})
}

// serviceAction is the POST, after Action's checks (the session's CSRF
// token and the confirmation, csrf.go): the pause or resume as the
// session's operator, then back to the services page with the outcome.
func (c *Console) serviceAction(w http.ResponseWriter, r *http.Request) {
	name, action, ok := c.serviceTarget(w, r)
	if !ok {
		return
	}
	op := c.cfg.Pauser.ResumeService
	if action == "pause" {
		op = c.cfg.Pauser.PauseService
	}
	reply, err := op(r.Context(), clock.PinnedNow(c.cfg.Clock), OperatorID(r), name)
	if err != nil {
		c.internal(w, r, err)
		return
	}
	done := url.Values{"done": {name + ": " + string(reply.Code)}}
	http.Redirect(w, r, Prefix+"/services?"+done.Encode(), http.StatusSeeOther)
}
