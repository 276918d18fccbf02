package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/escapement/escapement/internal/userfile"
	"github.com/escapement/escapement/sim/scenario"
	"go.yaml.in/yaml/v3"
)

// maxTraceBytes bounds a trace `sim replay` reads (sim.Replay's own bound).
const maxTraceBytes = 1 << 30

// loadScenarioPaths loads scenario files and directories (every *.yaml and
// *.yml directly in a directory, in name order) as sim.LoadPaths does, but
// reads each file through userfile: a FIFO, a device such as /dev/zero or a
// file past sim.MaxScenarioBytes is refused, naming the file, instead of
// hanging or filling memory. Names must be unique across everything loaded.
func loadScenarioPaths(paths []string) ([]*scenario.Scenario, error) {
	type loaded struct {
		s    *scenario.Scenario
		data []byte
	}
	var all []loaded
	load := func(file string) error {
		data, err := userfile.Read(file, scenario.MaxScenarioBytes)
		if err != nil {
			return &scenario.LoadError{File: file, Msg: strings.TrimPrefix(err.Error(), file+": ")}
		}
		s, err := scenario.Load(file, data)
		if err != nil {
			return err
		}
		all = append(all, loaded{s, data})
		return nil
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, &scenario.LoadError{File: p, Msg: err.Error()}
		}
		if !st.IsDir() {
			if err := load(p); err != nil {
				return nil, err
			}
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, &scenario.LoadError{File: p, Msg: err.Error()}
		}
		var names []string
		for _, e := range entries {
			if !e.IsDir() && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
				names = append(names, e.Name())
			}
		}
		if len(names) == 0 {
			return nil, &scenario.LoadError{File: p, Msg: "no *.yaml scenario files"}
		}
		sort.Strings(names)
		for _, n := range names {
			if err := load(filepath.Join(p, n)); err != nil {
				return nil, err
			}
		}
	}
	seen := map[string]string{}
	out := make([]*scenario.Scenario, 0, len(all))
	for _, l := range all {
		if prev, dup := seen[l.s.Name]; dup {
			return nil, &scenario.LoadError{File: l.s.File, Line: nameLine(l.data), Msg: fmt.Sprintf("name: %q is already used by %s", l.s.Name, prev)}
		}
		seen[l.s.Name] = l.s.File
		out = append(out, l.s)
	}
	return out, nil
}

// nameLine is the line of a scenario's top-level name field (0 if unknown).
func nameLine(data []byte) int {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil || len(doc.Content) == 0 {
		return 0
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "name" {
			return m.Content[i].Line
		}
	}
	return 0
}
