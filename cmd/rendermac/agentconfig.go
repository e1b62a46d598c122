package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

// The agent's settings come from three layers: flags beat RENDERMAC_*
// environment variables, which beat the config file (--config, or
// RENDERMAC_CONFIG). A flag's variable is RENDERMAC_ and its name in upper
// case with - as _ (--token-file: RENDERMAC_TOKEN_FILE); its key in the file
// is its name ({"services": "ffmpeg.h264_720p", "slots": 2}).

// notLayered are flags only a command line sets: a pairing code is single
// use, and the file cannot name itself.
var notLayered = map[string]bool{"pair": true, "config": true}

// envName is the environment variable of flag name.
func envName(name string) string {
	return "RENDERMAC_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// readConfigFile reads a JSON object of flag names to values ("" path: none).
func readConfigFile(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var raw map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		switch v := v.(type) {
		case string:
			out[k] = v
		case json.Number:
			out[k] = v.String()
		case bool:
			out[k] = fmt.Sprint(v)
		default:
			return nil, fmt.Errorf("config %s: %q: want a string, number or boolean", path, k)
		}
	}
	return out, nil
}

// applyLayers sets each flag the command line left unset from the
// environment (lookup), else from file. A file key naming no flag is an
// error, so a typo is not silently ignored (the environment is shared with
// other programs, so only the variables of known flags are read).
func applyLayers(set *flag.FlagSet, lookup func(string) (string, bool), file map[string]string) error {
	explicit := map[string]bool{}
	set.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	keys := make([]string, 0, len(file))
	for k := range file {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if set.Lookup(k) == nil || notLayered[k] {
			return usageError{fmt.Sprintf("config file: unknown setting %q", k)}
		}
	}
	var err error
	set.VisitAll(func(f *flag.Flag) {
		if err != nil || explicit[f.Name] || notLayered[f.Name] {
			return
		}
		v, from := file[f.Name], "config file"
		_, inFile := file[f.Name]
		if ev, ok := lookup(envName(f.Name)); ok && ev != "" {
			v, from, inFile = ev, envName(f.Name), true
		}
		if inFile {
			if e := set.Set(f.Name, v); e != nil {
				err = usageError{fmt.Sprintf("%s: --%s %q: %v", from, f.Name, v, e)}
			}
		}
	})
	return err
}
