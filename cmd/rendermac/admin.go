package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/console"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/store"
	"github.com/rendermac/rendermac/server/webhook"
)

// adminCommand is one `rendermac admin` subcommand.
type adminCommand struct {
	name, synopsis, summary string
	run                     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func adminCommands() []adminCommand {
	return []adminCommand{
		{"create-buyer", "--name N --balance-cents C [--webhook-url U] [--signing-key-file F] [--db URL]",
			"create a buyer and print its id and first API key (once)", adminCreateBuyer},
		{"create-api-key", "--buyer ID [--db URL]", "mint another API key for a buyer (printed once)", adminCreateAPIKey},
		{"pair-code", "[--ttl 10m] [--db URL]", "mint a single-use device pairing code (printed once)", adminPairCode},
		{"list-devices", "[--db URL]", "list paired devices", adminListDevices},
		{"revoke-device", "--id ID [--db URL]", "revoke a device: no more leases, no reconnects", adminRevokeDevice},
		{"webhook-secret", "--buyer ID --signing-key-file F [--legacy]", "print a buyer's webhook signing secret (whsec_<base64>, Standard Webhooks)", adminWebhookSecret},
		{"create-operator", "--name NAME [--db URL]", "mint an operator credential for the web console at /console (printed once)", adminCreateOperator},
		{"list-operators", "[--db URL]", "list operator credentials (never the secrets)", adminListOperators},
		{"revoke-operator", "--id ID [--db URL]", "revoke an operator credential; its console sessions end", adminRevokeOperator},
		{"service", "pause|resume NAME --server URL [--credential-file F]",
			"pause or resume offering a service's jobs, as the operator whose credential is given", adminServiceState},
		{"gen-key", "FILE", "write a new 32-byte random signing key to FILE (mode 0600)", adminGenKey},
	}
}

// runAdmin dispatches `rendermac admin <subcommand>`.
func runAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stdout, "Usage: rendermac admin <subcommand> [flags]\n\nSubcommands:")
		for _, c := range adminCommands() {
			fmt.Fprintf(stdout, "  %-15s %s\n", c.name, c.summary)
		}
		fmt.Fprintln(stdout, "\n--db defaults to $DATABASE_URL; --signing-key-file to $RENDERMAC_SIGNING_KEY_FILE.")
		return nil
	}
	for _, c := range adminCommands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	return usageError{fmt.Sprintf("unknown admin subcommand %q", args[0])}
}

// flagSetWithDB is an admin subcommand's flags, with the --db every one
// but gen-key and webhook-secret uses.
type flagSetWithDB struct {
	*flag.FlagSet
	db *string
}

// adminFlagSet returns the flags of subcommand name, with --db when withDB.
func adminFlagSet(name string, stderr io.Writer, withDB bool) *flagSetWithDB {
	for _, c := range adminCommands() {
		if c.name == name {
			f := &flagSetWithDB{FlagSet: newFlagSet("admin "+name, c.synopsis, stderr)}
			if withDB {
				f.db = f.String("db", os.Getenv("DATABASE_URL"), "Postgres URL (env DATABASE_URL)")
			}
			return f
		}
	}
	panic("admin: no subcommand " + name) // the table and its callers disagree
}

// openPool connects to the --db database after the flags are parsed.
func (f *flagSetWithDB) openPool(ctx context.Context) (*pgxpool.Pool, error) {
	if *f.db == "" {
		return nil, usageError{"--db (or DATABASE_URL) is required"}
	}
	return store.OpenPool(ctx, *f.db)
}

// adminService is a service for the operator operations, which never
// verify outputs, hence no artifact store.
func adminService(pool *pgxpool.Pool) *fencing.Service {
	return fencing.NewService(pool, nil, protocol.RandomIDs{Jobs: rand.Reader, Attempts: rand.Reader, Tokens: rand.Reader}, fencing.Config{})
}

func adminCreateBuyer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := adminFlagSet("create-buyer", stderr, true)
	name := f.String("name", "", "buyer name")
	balance := f.Int64("balance-cents", -1, "opening balance in cents")
	hook := f.String("webhook-url", "", "http(s) URL terminal job events are POSTed to")
	keyFile := f.String("signing-key-file", os.Getenv("RENDERMAC_SIGNING_KEY_FILE"),
		"the server's signing key, to print the buyer's webhook secret (env RENDERMAC_SIGNING_KEY_FILE)")
	if err := parseFlags(f.FlagSet, args); err != nil {
		return err
	}
	if strings.TrimSpace(*name) == "" || *balance < 0 {
		return usageError{"--name and a --balance-cents >= 0 are required"}
	}
	pool, err := f.openPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	id := protocol.UUIDFrom(rand.Reader)
	b, err := createBuyer(ctx, pool, id, *name, *balance, *hook)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "buyer_id: %s\napi_key:  %s\n", b.id, b.apiKey)
	if *hook != "" && *keyFile != "" {
		key, err := loadSigningKey(*keyFile)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "webhook_secret: %s\nwebhook_secret_legacy: %s\n", webhook.StandardSecret(key, id), webhook.BuyerSecret(key, id))
	}
	fmt.Fprintln(stdout, "The API key is shown only this once; store it now.")
	return nil
}

type newBuyer struct{ id, apiKey string }

// createBuyer creates the buyer, sets its webhook URL and mints its first
// API key. The steps are separate statements: if a later one fails, the
// error names the buyer so the operator can finish with create-api-key.
func createBuyer(ctx context.Context, pool *pgxpool.Pool, id, name string, balance int64, hook string) (newBuyer, error) {
	if err := adminService(pool).CreateBuyer(ctx, id, name, balance); err != nil {
		return newBuyer{}, err
	}
	if hook != "" {
		if err := api.SetWebhookURL(ctx, pool, id, hook); err != nil {
			return newBuyer{}, fmt.Errorf("buyer %s created, but: %w", id, err)
		}
	}
	key, err := api.CreateAPIKey(ctx, pool, id)
	if err != nil {
		return newBuyer{}, fmt.Errorf("buyer %s created, but: %w", id, err)
	}
	return newBuyer{id: id, apiKey: key}, nil
}

func adminCreateAPIKey(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := adminFlagSet("create-api-key", stderr, true)
	buyer := f.String("buyer", "", "buyer id")
	if err := parseFlags(f.FlagSet, args); err != nil {
		return err
	}
	if *buyer == "" {
		return usageError{"--buyer is required"}
	}
	pool, err := f.openPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	key, err := api.CreateAPIKey(ctx, pool, *buyer)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "api_key: %s\nThe API key is shown only this once; store it now.\n", key)
	return nil
}

func adminPairCode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := adminFlagSet("pair-code", stderr, true)
	ttl := f.Duration("ttl", 10*time.Minute, "how long the code stays valid (at most 24h)")
	if err := parseFlags(f.FlagSet, args); err != nil {
		return err
	}
	if *ttl <= 0 || *ttl > api.MaxPairingCodeTTL {
		return usageError{fmt.Sprintf("--ttl %v must be positive and at most %v", *ttl, api.MaxPairingCodeTTL)}
	}
	pool, err := f.openPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	code, expires, err := api.CreatePairingCode(ctx, pool, time.Time{}, *ttl)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "pairing_code: %s\nexpires_at:   %s\nSingle use; a few wrong guesses burn it. On the Mac: rendermac agent --server URL --pair %s --services ... --work DIR\n",
		code, expires.Format(time.RFC3339), code)
	return nil
}

func adminListDevices(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := adminFlagSet("list-devices", stderr, true)
	if err := parseFlags(f.FlagSet, args); err != nil {
		return err
	}
	pool, err := f.openPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	devices, err := api.ListDevices(ctx, pool)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tSLOTS\tLIVE\tSERVICES\tLAST SEEN")
	for _, d := range devices {
		seen := "never"
		if d.LastSeenAt != nil {
			seen = d.LastSeenAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", d.ID, d.Name, d.Status, d.SlotsTotal, d.LiveAttempts,
			strings.Join(d.Services, ","), seen)
	}
	return tw.Flush()
}

func adminRevokeDevice(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := adminFlagSet("revoke-device", stderr, true)
	id := f.String("id", "", "device id")
	if err := parseFlags(f.FlagSet, args); err != nil {
		return err
	}
	if *id == "" {
		return usageError{"--id is required"}
	}
	pool, err := f.openPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := adminService(pool).RevokeDevice(ctx, *id); err != nil {
		if errors.Is(err, fencing.ErrNotFound) {
			return fmt.Errorf("no device %s", *id)
		}
		return err
	}
	fmt.Fprintf(stdout, "device %s revoked; its live attempts end by fail, commit or lease expiry\n", *id)
	return nil
}

func adminWebhookSecret(_ context.Context, args []string, stdout, stderr io.Writer) error {
	f := adminFlagSet("webhook-secret", stderr, false)
	buyer := f.String("buyer", "", "buyer id")
	keyFile := f.String("signing-key-file", os.Getenv("RENDERMAC_SIGNING_KEY_FILE"), "the server's signing key")
	legacy := f.Bool("legacy", false, "print the key of the deprecated X-RenderMac-Signature header instead of the Standard Webhooks secret")
	if err := parseFlags(f.FlagSet, args); err != nil {
		return err
	}
	if !protocol.ValidID(*buyer) || *keyFile == "" {
		return usageError{"--buyer (a buyer id) and --signing-key-file are required"}
	}
	key, err := loadSigningKey(*keyFile)
	if err != nil {
		return err
	}
	if *legacy {
		fmt.Fprintln(stdout, webhook.BuyerSecret(key, *buyer))
	} else {
		fmt.Fprintln(stdout, webhook.StandardSecret(key, *buyer))
	}
	return nil
}

func adminGenKey(_ context.Context, args []string, stdout, stderr io.Writer) error {
	f := adminFlagSet("gen-key", stderr, false)
	if len(args) == 1 && isHelp(args[0]) {
		return parseFlags(f.FlagSet, args)
	}
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		return usageError{"gen-key takes exactly one argument, the key file to create"}
	}
	if err := writeSigningKey(args[0]); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "signing key written to %s (mode 0600)\n", args[0])
	return nil
}

// writeSigningKey creates path with a fresh random key, mode 0600. It never
// overwrites: replacing a live key would invalidate every grant and change
// every buyer's webhook secret.
func writeSigningKey(path string) error {
	key := make([]byte, grant.MinKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("gen-key: %w", err)
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("gen-key: %w", err)
	}
	if _, err := fh.Write(key); err != nil {
		_ = fh.Close()
		_ = os.Remove(path)
		return fmt.Errorf("gen-key: %w", err)
	}
	if err := fh.Sync(); err != nil {
		_ = fh.Close()
		return fmt.Errorf("gen-key: %w", err)
	}
	return fh.Close()
}

func adminCreateOperator(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := adminFlagSet("create-operator", stderr, true)
	name := f.String("name", "", "who the credential is for (shown in list-operators)")
	if err := parseFlags(f.FlagSet, args); err != nil {
		return err
	}
	if strings.TrimSpace(*name) == "" {
		return usageError{"--name is required"}
	}
	pool, err := f.openPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	id, cred, err := console.CreateOperator(ctx, pool, *name)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "operator_id: %s\noperator_credential: %s\n"+
		"The credential is shown only this once; store it now. Log in at http://SERVER/console/login, or send it as Authorization: Bearer.\n",
		id, cred)
	return nil
}

func adminListOperators(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := adminFlagSet("list-operators", stderr, true)
	if err := parseFlags(f.FlagSet, args); err != nil {
		return err
	}
	pool, err := f.openPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	ops, err := console.ListOperators(ctx, pool)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tCREATED\tREVOKED")
	for _, o := range ops {
		revoked := "-"
		if o.RevokedAt != nil {
			revoked = o.RevokedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", o.ID, o.Name, o.CreatedAt.UTC().Format(time.RFC3339), revoked)
	}
	return tw.Flush()
}

func adminRevokeOperator(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := adminFlagSet("revoke-operator", stderr, true)
	id := f.String("id", "", "operator id")
	if err := parseFlags(f.FlagSet, args); err != nil {
		return err
	}
	if *id == "" {
		return usageError{"--id is required"}
	}
	pool, err := f.openPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := console.RevokeOperator(ctx, pool, *id); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "operator %s revoked; its console sessions end at their next request\n", *id)
	return nil
}

// adminServiceState is `rendermac admin service pause|resume NAME`: the
// operator's POST /v1/admin/services/NAME/pause or /resume on a running
// server, so the audit row names the operator whose credential it is.
func adminServiceState(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := adminFlagSet("service", stderr, false)
	server := f.String("server", os.Getenv("RENDERMAC_SERVER"), "the control plane's URL, e.g. https://rendermac.example:8443 (env RENDERMAC_SERVER)")
	credFile := f.String("credential-file", "", "file holding the operator credential (default: env RENDERMAC_OPERATOR_CREDENTIAL)")
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		return parseFlags(f.FlagSet, args)
	}
	if len(args) == 0 || (args[0] != "pause" && args[0] != "resume") {
		return usageError{"want: rendermac admin service pause|resume NAME --server URL"}
	}
	action := args[0]
	if err := parseFlags(f.FlagSet, args[1:]); err != nil {
		return err
	}
	if f.NArg() != 1 || *server == "" {
		return usageError{"want: rendermac admin service " + action + " NAME --server URL"}
	}
	cred := os.Getenv("RENDERMAC_OPERATOR_CREDENTIAL")
	if *credFile != "" {
		b, err := os.ReadFile(*credFile)
		if err != nil {
			return fmt.Errorf("read --credential-file: %w", err)
		}
		cred = strings.TrimSpace(string(b))
	}
	if cred == "" {
		return usageError{"an operator credential is required: RENDERMAC_OPERATOR_CREDENTIAL or --credential-file (rendermac admin create-operator)"}
	}
	st, err := postServiceState(ctx, *server, cred, f.Arg(0), action)
	if err != nil {
		return err
	}
	state := "offered"
	if st.Paused {
		state = "paused: no job of it is offered; queued jobs wait and still expire at their admission deadlines"
	}
	fmt.Fprintf(stdout, "%s: %s (%s)\n", st.Service, st.Code, state)
	return nil
}

// postServiceState sends the operator's pause or resume and decodes the
// answer; a refusal is an error carrying the server's code and message.
func postServiceState(ctx context.Context, server, credential, service, action string) (api.ServiceState, error) {
	u := strings.TrimRight(server, "/") + "/v1/admin/services/" + url.PathEscape(service) + "/" + action
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return api.ServiceState{}, err
	}
	req.Header.Set("Authorization", "Bearer "+credential)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return api.ServiceState{}, fmt.Errorf("%s service %s: %w", action, service, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return api.ServiceState{}, fmt.Errorf("%s service %s: read answer: %w", action, service, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Code, Message string }
		_ = json.Unmarshal(body, &e)
		return api.ServiceState{}, fmt.Errorf("%s service %s: HTTP %d %s: %s", action, service, resp.StatusCode, e.Code, e.Message)
	}
	var st api.ServiceState
	if err := json.Unmarshal(body, &st); err != nil {
		return api.ServiceState{}, fmt.Errorf("%s service %s: answer is not JSON: %w", action, service, err)
	}
	return st, nil
}
