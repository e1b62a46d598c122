package pgprovider

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Databases made by NewDatabase are named pgp_<pid>_<rand>_<n>: pid and
// counter make names unique in one process; the random part keeps
// containerised CI jobs (often all pid 1) apart on a shared server. The
// prefix is also what DropDatabase insists on, so it cannot drop a
// database it did not make.
const clonePrefix = "pgp_"

var (
	processTag = fmt.Sprintf("%d_%04x", os.Getpid(), rand.Uint32()&0xffff)
	dbCounter  atomic.Uint64
	// providerCounter numbers the Providers of this process: in env mode
	// several share one server at once (qualify's campaigns beside its
	// scenarios), each with its own templates.
	providerCounter atomic.Uint64
	validName       = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)
)

// Template creates database name once per Provider and runs migrate
// against it; later calls with the same name return nil at once, so every
// test can call it. If migrate fails the database is dropped and the next
// call tries again. Names are lower-case identifiers of at most 40 bytes.
//
// In env mode the physical database is name_<process tag>_<provider
// number>, because test binaries of several packages, and several
// Providers of one process, share that server concurrently and must not
// clobber each other's templates; NewDatabase maps the name for you.
//
// migrate must close its connections before returning: PostgreSQL refuses
// to clone a database somebody is connected to.
func (p *Provider) Template(ctx context.Context, name string, migrate func(ctx context.Context, url string) error) error {
	if !validName.MatchString(name) || name == "postgres" || name == "template0" || name == "template1" || strings.HasPrefix(name, clonePrefix) {
		return fmt.Errorf("pgprovider: invalid template name %q", name)
	}
	// One mutex for all templates: creation is rare and serialising it
	// keeps concurrent first callers from racing each other's migrations.
	p.tmplMu.Lock()
	defer p.tmplMu.Unlock()
	p.mu.Lock()
	_, done := p.templates[name]
	p.mu.Unlock()
	if done {
		return nil
	}
	phys := name
	if p.kind == KindEnv {
		phys = name + "_" + p.tag
	}
	if err := p.admin(ctx, func(conn *pgx.Conn) error {
		create := "CREATE DATABASE " + ident(phys)
		_, err := conn.Exec(ctx, create)
		if pgCode(err) == "42P04" { // duplicate_database: a leftover, rebuild it
			if _, err = conn.Exec(ctx, "DROP DATABASE "+ident(phys)+" WITH (FORCE)"); err == nil {
				_, err = conn.Exec(ctx, create)
			}
		}
		return err
	}); err != nil {
		return fmt.Errorf("pgprovider: create template %s: %w", phys, err)
	}
	p.track(phys, true)
	if migrate != nil {
		if err := migrate(ctx, withDatabase(p.adminURL, phys)); err != nil {
			_ = p.drop(context.WithoutCancel(ctx), phys)
			return fmt.Errorf("pgprovider: migrate template %s: %w", name, err)
		}
	}
	p.mu.Lock()
	p.templates[name] = phys
	p.mu.Unlock()
	return nil
}

// NewDatabase clones template (a name given to Template, or any existing
// database such as "template1") into a new uniquely named database and
// returns its URL. Clones of one template are independent of each other.
func (p *Provider) NewDatabase(ctx context.Context, template string) (string, error) {
	p.mu.Lock()
	src, ok := p.templates[template]
	p.mu.Unlock()
	if !ok {
		src = template
	}
	var name string
	err := p.admin(ctx, func(conn *pgx.Conn) error {
		// A migrate that just returned may leave a backend exiting for a
		// few ms; CREATE DATABASE then reports the template as in use
		// (55006). That is transient, so retry briefly.
		delay := 10 * time.Millisecond
		deadline := time.Now().Add(10 * time.Second)
		for {
			name = fmt.Sprintf("%s%s_%d", clonePrefix, processTag, dbCounter.Add(1))
			_, err := conn.Exec(ctx, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(src))
			code := pgCode(err)
			if (code != "55006" && code != "42P04") || time.Now().After(deadline) {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(delay):
			}
			delay = min(2*delay, 200*time.Millisecond)
		}
	})
	if err != nil {
		return "", fmt.Errorf("pgprovider: clone %s: %w", src, err)
	}
	p.track(name, true)
	return withDatabase(p.adminURL, name), nil
}

// DropDatabase drops a database made by NewDatabase, terminating its
// sessions first. Dropping one that is already gone is not an error.
func (p *Provider) DropDatabase(ctx context.Context, dbURL string) error {
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		return fmt.Errorf("pgprovider: parse %q: %w", dbURL, err)
	}
	if !strings.HasPrefix(cfg.Database, clonePrefix) {
		return fmt.Errorf("pgprovider: refusing to drop %q: not made by NewDatabase", cfg.Database)
	}
	return p.drop(ctx, cfg.Database)
}

func (p *Provider) drop(ctx context.Context, name string) error {
	err := p.admin(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)")
		return err
	})
	if err != nil {
		return fmt.Errorf("pgprovider: drop %s: %w", name, err)
	}
	p.track(name, false)
	return nil
}

// dropCreated removes what this Provider created on a server it does not
// own (env mode), so a shared server does not fill up with test databases.
func (p *Provider) dropCreated(ctx context.Context) error {
	p.mu.Lock()
	names := make([]string, 0, len(p.created))
	for n := range p.created {
		names = append(names, n)
	}
	p.mu.Unlock()
	var errs []error
	for _, n := range names {
		errs = append(errs, p.drop(ctx, n))
	}
	return errors.Join(errs...)
}

func (p *Provider) track(name string, add bool) {
	if p.kind != KindEnv {
		return // the whole server goes away on Close
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.created[name] = true
	} else {
		delete(p.created, name)
	}
}

// admin runs f on a fresh maintenance connection. A connection per call
// (instead of a pool) survives Crash/Start without stale state and leaves
// no background goroutines behind.
func (p *Provider) admin(ctx context.Context, f func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, p.adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return f(conn)
}

// withDatabase returns base with its database replaced by db. Both URL and
// keyword/value forms are accepted; in the latter the last dbname wins.
func withDatabase(base, db string) string {
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		if u, err := url.Parse(base); err == nil {
			u.Path, u.RawPath = "/"+db, ""
			q := u.Query()
			if q.Has("dbname") {
				q.Set("dbname", db)
				u.RawQuery = q.Encode()
			}
			return u.String()
		}
	}
	return base + " dbname=" + db
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
