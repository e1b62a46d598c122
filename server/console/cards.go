package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// maxCardBytes bounds an uploaded or listed card.
const maxCardBytes = 16 << 20

// cardName is what a card file may be called: qualify's names
// (YYYY-MM-DD-...json) and any other plain name ending in .json; never a
// path.
var cardName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,150}\.json$`)

// CardSummary is a card as the cards page lists it: the few fields of
// qualify's JSON card it needs, read without package evidence.
type CardSummary struct {
	Name   string
	Title  string `json:"title"`
	Date   string `json:"date"`
	Passed bool   `json:"passed"`
	Run    struct {
		Commit  string `json:"commit"`
		Dirty   bool   `json:"dirty"`
		Command string `json:"command"`
	} `json:"run"`
	Failures  []json.RawMessage `json:"failures"`
	Campaigns []json.RawMessage `json:"campaigns"`
	Scenarios []json.RawMessage `json:"scenarios"`
	Error     string
}

type cardsView struct {
	Dir   string
	Cards []CardSummary
	// Bench is the history-scale bench's report when the cards directory
	// holds one (HistoryBenchReport), nil otherwise.
	Bench     *benchSummary
	CanDiff   bool
	CanUpload bool
	A, B      string
	Diff      []string
	Diffed    bool
}

// readCard reads a card by name from the cards directory.
func (c *Console) readCard(name string) ([]byte, error) {
	if c.cfg.CardsDir == "" {
		return nil, errors.New("no cards directory is configured (rendermac server --cards DIR)")
	}
	if !cardName.MatchString(name) {
		return nil, fmt.Errorf("%q is not a card name", name)
	}
	f, err := os.Open(filepath.Join(c.cfg.CardsDir, name))
	if err != nil {
		return nil, fmt.Errorf("card %s: %w", name, errors.Unwrap(err))
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxCardBytes))
}

// listCards reads the summaries of the cards directory's JSON cards,
// newest name first. JSON files that are not cards (JUnit is XML; a
// mutation score card has no campaigns) are listed with the error.
func (c *Console) listCards() ([]CardSummary, error) {
	if c.cfg.CardsDir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(c.cfg.CardsDir)
	if err != nil {
		return nil, fmt.Errorf("cards directory: %w", err)
	}
	var out []CardSummary
	for _, e := range entries {
		if e.IsDir() || !cardName.MatchString(e.Name()) || e.Name() == HistoryBenchReport {
			continue
		}
		s := CardSummary{Name: e.Name()}
		b, err := c.readCard(e.Name())
		if err == nil {
			err = json.Unmarshal(b, &s)
		}
		if err == nil && s.Title == "" {
			err = errors.New("not a qualification card (no title)")
		}
		if err != nil {
			s.Error = err.Error()
		}
		s.Name = e.Name()
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b CardSummary) int { return strings.Compare(b.Name, a.Name) })
	return out, nil
}

func (c *Console) cardsView() (cardsView, error) {
	cards, err := c.listCards()
	return cardsView{Dir: c.cfg.CardsDir, Cards: cards, CanDiff: c.cfg.CardDiff != nil && c.cfg.CardsDir != "",
		CanUpload: c.cfg.CardsDir != "" && c.cfg.CardHTML != nil, Bench: c.readBench()}, err
}

// The history-scale bench's report and plot (`rendermac bench --history
// --out DIR`): the cards page shows them when the cards directory holds
// them.
const (
	HistoryBenchReport = "history-bench.json"
	HistoryBenchPlot   = "history-bench.png"
)

// benchSummary is the part of the history bench's report the cards page
// shows: its figures side by side, one column per history size.
type benchSummary struct {
	Started time.Time `json:"started"`
	Points  []struct {
		History int `json:"history"`
	} `json:"points"`
	Figures []struct {
		Name   string    `json:"name"`
		Unit   string    `json:"unit"`
		Values []float64 `json:"values"`
		Ratio  float64   `json:"ratio_largest_to_empty"`
		Met    bool      `json:"goal_met"`
	} `json:"figures"`
	HasPlot bool   `json:"-"`
	Error   string `json:"-"`
}

// readBench reads the history bench's report from the cards directory
// (nil: none there).
func (c *Console) readBench() *benchSummary {
	if c.cfg.CardsDir == "" {
		return nil
	}
	b, err := c.readCard(HistoryBenchReport)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	s := &benchSummary{}
	if err == nil {
		err = json.Unmarshal(b, s)
	}
	if err != nil {
		s.Error = err.Error()
	}
	_, perr := os.Stat(filepath.Join(c.cfg.CardsDir, HistoryBenchPlot))
	s.HasPlot = perr == nil
	return s
}

// benchPlot serves the history bench's plot from the cards directory.
func (c *Console) benchPlot(w http.ResponseWriter, r *http.Request) {
	if c.cfg.CardsDir == "" {
		c.refuse(w, r, http.StatusNotFound, "no cards directory is configured (rendermac server --cards DIR)")
		return
	}
	b, err := os.ReadFile(filepath.Join(c.cfg.CardsDir, HistoryBenchPlot))
	if err != nil {
		c.refuse(w, r, http.StatusNotFound, "no history bench plot: "+HistoryBenchPlot+" is not in the cards directory")
		return
	}
	w.Header().Set("Content-Type", "image/png")
	_, _ = w.Write(b)
}

func (c *Console) cardsPage(w http.ResponseWriter, r *http.Request) {
	v, err := c.cardsView()
	if err != nil {
		c.internal(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "cards", view{Title: "Qualification cards", Nav: "cards", Data: v})
}

func (c *Console) cardPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	b, err := c.readCard(name)
	if err != nil {
		c.refuse(w, r, http.StatusNotFound, err.Error())
		return
	}
	s := CardSummary{}
	if err := json.Unmarshal(b, &s); err != nil {
		s.Error = err.Error()
	}
	s.Name = name
	c.render(w, r, http.StatusOK, "card", view{Title: "Card " + name, Nav: "cards",
		Data: struct {
			Card    CardSummary
			HasHTML bool
		}{s, c.cfg.CardHTML != nil}})
}

// cardHTML serves a card as qualify's HTML card, sandboxed: it is a
// document of its own, shown in a frame of the card's page.
func (c *Console) cardHTML(w http.ResponseWriter, r *http.Request) {
	if c.cfg.CardHTML == nil {
		c.refuse(w, r, http.StatusNotFound, "this server renders no HTML cards")
		return
	}
	b, err := c.readCard(r.PathValue("name"))
	if err != nil {
		c.refuse(w, r, http.StatusNotFound, err.Error())
		return
	}
	page, err := c.CardHTMLBytes(b)
	if err != nil {
		c.refuse(w, r, http.StatusUnprocessableEntity, err.Error())
		return
	}
	w.Header().Set("Content-Security-Policy", "sandbox; default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'self'")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(page)
}

// CardHTMLBytes renders a JSON card with Config.CardHTML.
func (c *Console) CardHTMLBytes(card []byte) ([]byte, error) {
	page, err := c.cfg.CardHTML(card)
	if err != nil {
		return nil, fmt.Errorf("not a qualification card: %w", err)
	}
	return page, nil
}

func (c *Console) cardDiffPage(w http.ResponseWriter, r *http.Request) {
	v, err := c.cardsView()
	if err != nil {
		c.internal(w, r, err)
		return
	}
	v.A, v.B = r.URL.Query().Get("a"), r.URL.Query().Get("b")
	if !v.CanDiff {
		c.refuse(w, r, http.StatusNotFound, "card diff needs a cards directory (--cards DIR)")
		return
	}
	a, err := c.readCard(v.A)
	var b []byte
	if err == nil {
		b, err = c.readCard(v.B)
	}
	if err == nil {
		v.Diff, err = c.cfg.CardDiff(a, b)
	}
	if err != nil {
		c.refuse(w, r, http.StatusBadRequest, "card diff: "+err.Error())
		return
	}
	v.Diffed = true
	c.render(w, r, http.StatusOK, "cards", view{Title: "Card diff", Nav: "cards", Data: v})
}

// uploadCard is POST /console/cards: a multipart form's "card" file, which
// must be a qualification card CardHTML can render, is written to the
// cards directory under its own name (an existing card is never
// overwritten). The form is same-origin only: the session cookie is
// SameSite=Strict and a foreign Origin is refused.
func (c *Console) uploadCard(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" {
		if u, err := url.Parse(o); err != nil || u.Host != r.Host {
			c.refuse(w, r, http.StatusForbidden, "cross-origin upload refused")
			return
		}
	}
	if c.cfg.CardsDir == "" || c.cfg.CardHTML == nil {
		c.refuse(w, r, http.StatusNotFound, "uploads need a cards directory (--cards DIR)")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxCardBytes+64<<10)
	f, hdr, err := r.FormFile("card")
	if err != nil {
		c.refuse(w, r, http.StatusBadRequest, "upload: a multipart form with a \"card\" file is required")
		return
	}
	defer f.Close()
	name := filepath.Base(hdr.Filename)
	if !cardName.MatchString(name) {
		c.refuse(w, r, http.StatusBadRequest, fmt.Sprintf("upload: %q is not a card file name (NAME.json)", name))
		return
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCardBytes))
	if err == nil {
		_, err = c.CardHTMLBytes(b)
	}
	if err != nil {
		c.refuse(w, r, http.StatusUnprocessableEntity, "upload: "+err.Error())
		return
	}
	out, err := os.OpenFile(filepath.Join(c.cfg.CardsDir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		c.refuse(w, r, http.StatusConflict, "upload: a card named "+name+" exists already")
		return
	}
	if err == nil {
		_, err = io.Copy(out, bytes.NewReader(b))
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		c.internal(w, r, fmt.Errorf("write card %s: %w", name, err))
		return
	}
	http.Redirect(w, r, Prefix+"/cards/"+url.PathEscape(name), http.StatusSeeOther)
}
