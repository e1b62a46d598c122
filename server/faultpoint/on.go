//go:build faultpoints

package faultpoint

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Enabled reports whether this binary was built with -tags faultpoints.
const Enabled = true

// Action is what an armed point does when it is hit, on the goroutine that
// hit it; ctx is the caller's context. When it returns, the caller goes on.
type Action func(ctx context.Context)

// Points is a registry: the actions armed at the points and a hit counter
// per point. The process has one, which the package-level functions use
// and EnableFromEnv arms. A harness that shares its process with other
// users of the service layer (qualify runs the scenarios beside the
// campaigns) gives its services a registry of their own
// (fencing.Config.FaultPoints), so that what it arms fires, and what it
// counts was hit, in those services only. A nil *Points is the process's.
type Points struct {
	// armed maps point names to actions. It is replaced whole on every
	// change, so Hit reads it without a lock; mu serialises the writers.
	mu    sync.Mutex
	armed atomic.Pointer[map[string]Action]
	// hits counts every Hit per point, armed or not. The map is filled
	// once by New and only read afterwards.
	hits map[string]*atomic.Int64
}

// New returns a registry with nothing armed and no hits.
func New() *Points {
	p := &Points{hits: make(map[string]*atomic.Int64, len(names))}
	for _, n := range names {
		p.hits[n] = new(atomic.Int64)
	}
	return p
}

// process is the registry of the package-level functions.
var process = New()

func (p *Points) or() *Points {
	if p == nil {
		return process
	}
	return p
}

// Hit counts the hit and runs the action armed at name, if any.
func (p *Points) Hit(ctx context.Context, name string) {
	p = p.or()
	if c := p.hits[name]; c != nil {
		c.Add(1)
	}
	if m := p.armed.Load(); m != nil {
		if a := (*m)[name]; a != nil {
			a(ctx)
		}
	}
}

// Hits returns how often name was hit since New or the last Clear.
func (p *Points) Hits(name string) int64 {
	if c := p.or().hits[name]; c != nil {
		return c.Load()
	}
	return 0
}

// Set arms name with action, replacing what was armed there; a nil action
// disarms it. An unknown name panics: a misspelt point would otherwise
// never fire, and the scenario would pass without its fault.
func (p *Points) Set(name string, action Action) {
	if !Known(name) {
		panic(fmt.Sprintf("faultpoint: unknown point %q (known: %s)", name, strings.Join(names, ", ")))
	}
	p = p.or()
	p.mu.Lock()
	defer p.mu.Unlock()
	next := map[string]Action{}
	if m := p.armed.Load(); m != nil {
		maps.Copy(next, *m)
	}
	if action == nil {
		delete(next, name)
	} else {
		next[name] = action
	}
	p.armed.Store(&next)
}

// Clear disarms every point and resets the hit counters.
func (p *Points) Clear() {
	p = p.or()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed.Store(nil)
	for _, c := range p.hits {
		c.Store(0)
	}
}

// Armed returns the names of the armed points, sorted.
func (p *Points) Armed() []string {
	m := p.or().armed.Load()
	if m == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(*m))
}

// Hit is the process registry's Hit.
func Hit(ctx context.Context, name string) { process.Hit(ctx, name) }

// Hits is the process registry's Hits.
func Hits(name string) int64 { return process.Hits(name) }

// Set is the process registry's Set.
func Set(name string, action Action) { process.Set(name, action) }

// Clear is the process registry's Clear.
func Clear() { process.Clear() }

// Armed is the process registry's Armed.
func Armed() []string { return process.Armed() }

// Block waits until ch is closed (or receives) or ctx ends.
func Block(ch <-chan struct{}) Action {
	return func(ctx context.Context) {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

// Kill SIGKILLs the own process at the point: no deferred calls run and no
// buffers are flushed, exactly as if the machine had lost the process.
func Kill() Action {
	return func(context.Context) { killSelf() }
}

// Inject runs f at the point, e.g. to fire a concurrent cancel between two
// transactions.
func Inject(f func(ctx context.Context)) Action {
	return Action(f)
}

// Once runs a only at the first hit; later hits pass through.
func Once(a Action) Action {
	var done atomic.Bool
	return func(ctx context.Context) {
		if done.CompareAndSwap(false, true) {
			a(ctx)
		}
	}
}

// envActions are the actions EnvVar may name.
var envActions = map[string]func() Action{
	"kill":  Kill,
	"block": func() Action { return Block(nil) }, // nil never receives: until ctx ends
}

// EnableFromEnv arms the points EnvVar names, as a comma-separated list of
// name=action with action kill or block. Unset or empty arms nothing. On
// any error (unknown point or action, a point named twice) nothing is
// armed. Each point armed here prints one line to stderr when it fires.
func EnableFromEnv() error {
	spec := strings.TrimSpace(os.Getenv(EnvVar))
	if spec == "" {
		return nil
	}
	parsed := map[string]string{}
	for _, item := range strings.Split(spec, ",") {
		name, action, ok := strings.Cut(strings.TrimSpace(item), "=")
		name, action = strings.TrimSpace(name), strings.TrimSpace(action)
		switch {
		case !ok:
			return fmt.Errorf("%s: %q is not name=action", EnvVar, item)
		case !Known(name):
			return fmt.Errorf("%s: unknown fault point %q (known: %s)", EnvVar, name, strings.Join(names, ", "))
		case envActions[action] == nil:
			return fmt.Errorf("%s: %s: unknown action %q (want kill or block)", EnvVar, name, action)
		case parsed[name] != "":
			return fmt.Errorf("%s: fault point %s is named twice", EnvVar, name)
		}
		parsed[name] = action
	}
	for _, name := range slices.Sorted(maps.Keys(parsed)) {
		Set(name, announced(name, parsed[name], envActions[parsed[name]]()))
	}
	return nil
}

// announced prints that the point fired before running a, unbuffered, so
// the line is in the log even when a kills the process.
func announced(name, action string, a Action) Action {
	return func(ctx context.Context) {
		fmt.Fprintf(os.Stderr, "faultpoint %s: %s (pid %d)\n", name, action, os.Getpid())
		a(ctx)
	}
}
