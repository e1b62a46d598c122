package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rendermac/rendermac/agent"
	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
)

// pairTimeout bounds the pairing request; a code is single-use, so a hung
// request is better reported than waited on.
const pairTimeout = 30 * time.Second

type agentFlags struct {
	server, pair, tokenFile, services, work, name, ffmpeg, logLevel, config string
	catalogue                                                               string
	caFile, serverPin                                                       string
	insecurePlaintext                                                       bool
	failover, logFormat, commandServices                                    string
	slots                                                                   int
	minFreeMB                                                               int64
	pingInterval, pingTimeout, drainTimeout                                 time.Duration
}

// agentVariantEnv selects a broken agent for the fleet harness (a -tags
// mutations build only). It is an environment variable, not a flag, so
// that no user meets it in --help.
const agentVariantEnv = "RENDERMAC_AGENT_VARIANT"

func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && slices.Contains(agentServiceCommands, args[0]) {
		h, err := realLaunchdHost()
		if err != nil {
			return err
		}
		return runAgentService(h, args[0], args[1:], stdout, stderr)
	}
	f, err := parseAgentFlags(args, stderr)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return usageError{fmt.Sprintf("--log-level %q: want debug, info, warn or error", f.logLevel)}
	}
	var handler slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})
	if f.logFormat == "json" {
		handler = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})
	}
	log := slog.New(handler)
	services := splitList(f.services)
	catalogue, err := loadCatalogue(f.catalogue)
	if err != nil {
		return err
	}
	runners, err := agentRunners(catalogue, services, f.ffmpeg, f.commandServices)
	if err != nil {
		return err
	}
	// While any attempt's runner runs, keep the Mac from idle-sleeping.
	power := agent.NewPowerAssertion(agent.PowerCommand(runtime.GOOS, os.Getpid()), agent.ExecProcess, log)
	runners = agent.KeepAwake(runners, power)
	creds, err := agentCredentials(ctx, f, services, stdout)
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Config{
		ServerURL: creds.Server, DeviceToken: creds.DeviceToken, Services: services, Slots: f.slots,
		WorkDir: f.work, Clock: clock.Real{}, Rand: mrand.New(mrand.NewPCG(cryptoSeed(), cryptoSeed())),
		Logger: log, Runners: runners, FailoverURLs: splitList(f.failover),
		MinFreeBytes: f.minFreeMB << 20, PingInterval: f.pingInterval, PingTimeout: f.pingTimeout,
		Variant: agent.Variant(os.Getenv(agentVariantEnv)), Transport: f.transport(),
	})
	if err != nil {
		return usageError{err.Error()}
	}
	log.Info("agent starting", "creds", creds, "services", services, "slots", f.slots, "work", f.work, "version", agent.Version)
	// The agent reads the signals itself (a first SIGTERM drains), so the
	// process-wide context that the first SIGTERM cancels is not its own.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	return a.RunSignalled(context.WithoutCancel(ctx), sigs, f.drainTimeout)
}

func parseAgentFlags(args []string, stderr io.Writer) (agentFlags, error) {
	var f agentFlags
	set := newFlagSet("agent", "--server URL (--pair CODE | --token-file F) --services LIST --slots N --work DIR [--name NAME] [--ffmpeg PATH] [--command-service NAME=FILE,...] [--config FILE]\n       rendermac agent install [AGENT FLAGS] | uninstall | status   (macOS: a launchd agent)", stderr)
	set.StringVar(&f.server, "server", "", "control plane base URL (http or https); required with --pair")
	set.StringVar(&f.pair, "pair", "", "pairing code from 'rendermac admin': pair this device, write --token-file, then run")
	set.StringVar(&f.tokenFile, "token-file", "", "device credentials file, mode 0600 (default $HOME/.rendermac/device.json)")
	set.StringVar(&f.services, "services", "", "comma-separated services to offer, from the catalogue (default catalogue: "+strings.Join(runner.Names(protocol.Services), ", ")+"), or one --command-service configures")
	set.StringVar(&f.catalogue, "catalogue", "", "service catalogue file (JSON, docs/SPEC.md \"Service catalogue\"), the same the server is given (default: the built-in services)")
	set.IntVar(&f.slots, "slots", 1, "attempts run at once (1..64)")
	set.StringVar(&f.work, "work", "", "work directory for inputs and outputs while attempts run")
	set.StringVar(&f.name, "name", "", "device name shown to operators when pairing (default: host name)")
	set.StringVar(&f.ffmpeg, "ffmpeg", "", "ffmpeg binary (default: ffmpeg on PATH)")
	set.StringVar(&f.commandServices, "command-service", "",
		"comma-separated NAME=FILE: service NAME runs the operator's renderer configured by the JSON file FILE (command runner: docs/operators.md, SPEC section 5)")
	set.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	set.StringVar(&f.config, "config", os.Getenv("RENDERMAC_CONFIG"),
		"JSON file of settings by flag name (env RENDERMAC_CONFIG); flags beat RENDERMAC_<FLAG> variables, which beat the file")
	set.StringVar(&f.logFormat, "log-format", "text", "text or json")
	set.StringVar(&f.failover, "failover", "", "comma-separated base URLs of further gateways of the same control plane, tried in turn when a session fails")
	set.Int64Var(&f.minFreeMB, "min-free-mb", agent.DefaultMinFreeBytes>>20, "take no offer while the work dir's file system has less than this many MiB free (-1: no check)")
	set.DurationVar(&f.pingInterval, "ping-interval", agent.DefaultPingInterval, "ping the gateway this often (capped at a third of the lease TTL)")
	set.DurationVar(&f.pingTimeout, "ping-timeout", agent.DefaultPingTimeout, "drop the connection when a pong takes longer (capped at a third of the lease TTL)")
	set.StringVar(&f.caFile, "ca-file", "", "PEM bundle of the CA that signed the server's certificate (a private CA), trusted besides the system roots")
	set.StringVar(&f.serverPin, "server-pin", "", "also require this public key in the server's verified chain: sha256/BASE64 of the SubjectPublicKeyInfo")
	set.BoolVar(&f.insecurePlaintext, "insecure-plaintext", false, "allow http:// to a server that is not on loopback (the device token then crosses the network in clear)")
	set.DurationVar(&f.drainTimeout, "drain-timeout", agent.DefaultDrainTimeout,
		"after a first SIGTERM or SIGINT, let running attempts finish for at most this long, then fail them as provider_offline (a second signal or SIGQUIT: at once)")
	if err := parseFlags(set, args); err != nil {
		return f, err
	}
	file, err := readConfigFile(f.config)
	if err != nil {
		return f, err
	}
	if err := applyLayers(set, os.LookupEnv, file); err != nil {
		return f, err
	}
	switch {
	case f.pair != "" && f.server == "":
		return f, usageError{"--pair needs --server"}
	case len(splitList(f.services)) == 0:
		return f, usageError{"--services is required"}
	case f.slots < 1 || f.slots > agent.MaxSlots:
		return f, usageError{fmt.Sprintf("--slots must be 1..%d", agent.MaxSlots)}
	case f.work == "":
		return f, usageError{"--work is required"}
	case f.logFormat != "text" && f.logFormat != "json":
		return f, usageError{"--log-format: want text or json"}
	case f.drainTimeout <= 0:
		return f, usageError{"--drain-timeout: want a positive duration"}
	case f.minFreeMB == 0:
		return f, usageError{"--min-free-mb: want a size in MiB, or -1 for no check"}
	}
	if f.tokenFile == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return f, usageError{"no home directory for the default --token-file; pass --token-file"}
		}
		f.tokenFile = filepath.Join(home, ".rendermac", "device.json")
	}
	return f, nil
}

// transport is how the agent reaches the server: --ca-file, --server-pin
// and --insecure-plaintext.
func (f agentFlags) transport() agent.Transport {
	return agent.Transport{CAFile: f.caFile, ServerPin: f.serverPin, InsecurePlaintext: f.insecurePlaintext}
}

// agentCredentials pairs (writing the token file) or loads the token file.
func agentCredentials(ctx context.Context, f agentFlags, services []string, stdout io.Writer) (agent.Credentials, error) {
	if f.pair == "" {
		c, err := agent.LoadCredentials(f.tokenFile)
		if errors.Is(err, fs.ErrNotExist) {
			return c, fmt.Errorf("%w; pair this device first: rendermac agent --server URL --pair CODE ...", err)
		}
		if err != nil {
			return c, err
		}
		if f.server != "" && strings.TrimRight(f.server, "/") != strings.TrimRight(c.Server, "/") {
			return c, usageError{fmt.Sprintf("--server %s differs from %s in %s; pair again to change servers", f.server, c.Server, f.tokenFile)}
		}
		return c, nil
	}
	name := f.name
	if name == "" {
		name, _ = os.Hostname()
	}
	pctx, cancel := context.WithTimeout(ctx, pairTimeout)
	defer cancel()
	c, err := agent.Pair(pctx, f.transport(), f.server, f.pair, name, services)
	if err != nil {
		return c, err
	}
	if err := agent.SaveCredentials(f.tokenFile, c); err != nil {
		return c, err
	}
	fmt.Fprintf(stdout, "paired as device %s; credentials written to %s\n", c.DeviceID, f.tokenFile)
	return c, nil
}

// agentRunners builds the offered services' runners from the catalogue,
// then gives each service of the --command-service list (NAME=FILE pairs, a
// command runner's JSON config; the service must be in the catalogue with
// runner kind "command") its configured runner. When one of them runs
// ffmpeg it checks that ffmpeg exists, and for a command service that its
// program exists, so a missing binary is a start-up error rather than a
// failed job per offer.
func agentRunners(catalogue []protocol.Service, services []string, ffmpegPath, commandServices string) (map[string]runner.Runner, error) {
	commands, err := commandRunners(catalogue, commandServices)
	if err != nil {
		return nil, err
	}
	if runner.NeedsFFmpeg(catalogue, services) {
		p, err := runner.LookFFmpeg(ffmpegPath)
		if err != nil {
			return nil, err
		}
		ffmpegPath = p
	}
	rs, err := runner.ForServices(catalogue, services, runner.Env{Clock: clock.Real{}, FFmpeg: ffmpegPath})
	if err != nil {
		return nil, usageError{"--services: " + err.Error()}
	}
	for name, c := range commands {
		if !slices.Contains(services, name) {
			continue
		}
		if err := c.Check(); err != nil {
			return nil, fmt.Errorf("--command-service %s: %w", name, err)
		}
		rs[name] = c
	}
	for name, r := range rs {
		if c, ok := r.(*runner.Command); ok && commands[name] == nil {
			if err := c.Check(); err != nil {
				return nil, fmt.Errorf("service %s: %w", name, err)
			}
		}
	}
	return rs, nil
}

// commandRunners reads the --command-service list: NAME=FILE pairs, each a
// command runner's JSON config (runner.CommandConfig) for a catalogue
// service of runner kind "command".
func commandRunners(catalogue []protocol.Service, list string) (map[string]*runner.Command, error) {
	out := map[string]*runner.Command{}
	for _, pair := range splitList(list) {
		name, file, ok := strings.Cut(pair, "=")
		name, file = strings.TrimSpace(name), strings.TrimSpace(file)
		if !ok || name == "" || file == "" {
			return nil, usageError{fmt.Sprintf("--command-service %q: want NAME=FILE", pair)}
		}
		svc, found := protocol.FindService(catalogue, name)
		switch {
		case !found:
			return nil, usageError{fmt.Sprintf("--command-service %s: not in the catalogue (add it with runner kind %q, docs/SPEC.md \"Service catalogue\")", name, protocol.RunnerCommand)}
		case svc.Runner.Kind != protocol.RunnerCommand:
			return nil, usageError{fmt.Sprintf("--command-service %s: the catalogue's runner kind is %q, not %q", name, svc.Runner.Kind, protocol.RunnerCommand)}
		case out[name] != nil:
			return nil, usageError{fmt.Sprintf("--command-service %s: named twice", name)}
		}
		cfg, err := runner.LoadCommandConfig(file)
		if err != nil {
			return nil, usageError{fmt.Sprintf("--command-service %s: %v", name, err)}
		}
		c, err := runner.NewCommand(cfg)
		if err != nil {
			return nil, usageError{fmt.Sprintf("--command-service %s (%s): %v", name, file, err)}
		}
		out[name] = c
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// cryptoSeed draws a seed for backoff jitter, so that no two agents share one.
func cryptoSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return binary.LittleEndian.Uint64(b[:])
}
