package mutate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Layer results.
const (
	Killed   = "killed"   // the layer failed
	Survived = "survived" // the layer passed
	Timeout  = "timeout"  // the layer did not finish in time: counted as killed (a hang is a bug a user sees)
	Errored  = "error"    // the layer could not run (its tests did not build): counted as neither
)

// Mutant statuses.
const (
	StatusRun          = "run"          // compiled; every layer ran
	StatusUncompilable = "uncompilable" // did not compile: discarded
)

// LayerResult is what one layer said about one mutant.
type LayerResult struct {
	Name    string  `json:"name"`
	Group   string  `json:"group"`
	Result  string  `json:"result"`
	Seconds float64 `json:"seconds"`
	// Detail is what killed it (the first failing tests, a panic, the last
	// lines of a failing command), or why the layer erred.
	Detail string `json:"detail,omitempty"`
}

// Record is one line of the JSON Lines output: one mutant and its verdicts.
type Record struct {
	ID        string   `json:"id"`
	File      string   `json:"file"`
	Line      int      `json:"line"`
	Col       int      `json:"col"`
	Op        Operator `json:"op"`
	Pkg       string   `json:"pkg"`
	Func      string   `json:"func,omitempty"`
	Before    string   `json:"before"`
	After     string   `json:"after"`
	SrcSHA256 string   `json:"src_sha256"`
	Profile   string   `json:"profile"`
	Status    string   `json:"status"`
	// CompileError is the compiler's first lines for an uncompilable mutant.
	CompileError string `json:"compile_error,omitempty"`
	// Equivalent is the allow-list's reason, if the mutant was on it when
	// it ran (reports use the allow-list current at report time).
	Equivalent string        `json:"equivalent,omitempty"`
	Layers     []LayerResult `json:"layers,omitempty"`
	Seconds    float64       `json:"seconds"`
}

// Diff is the one-line form of the change.
func (r *Record) Diff() string { return r.Before + "  →  " + r.After }

// KilledBy reports whether any layer of the group killed the mutant (a
// timeout counts).
func (r *Record) KilledBy(group string) bool {
	for _, l := range r.Layers {
		if l.Group == group && (l.Result == Killed || l.Result == Timeout) {
			return true
		}
	}
	return false
}

// Incomplete reports a record some layer of which could not run (its tests
// did not build: a broken build cache, a full disk): it says nothing about
// the mutant, so a resumed run judges the mutant again.
func (r *Record) Incomplete() bool {
	for _, l := range r.Layers {
		if l.Result == Errored {
			return true
		}
	}
	return false
}

// Key identifies a record's mutant in its file's version.
func (r *Record) Key() string { return r.ID + "@" + r.SrcSHA256 }

// Latest keeps the last record of each mutant (a rejudged mutant's record
// is appended after the old one).
func Latest(recs []*Record) map[string]*Record {
	out := map[string]*Record{}
	for _, r := range recs {
		out[r.Key()] = r
	}
	return out
}

// Layer returns the named layer's result (nil if it did not run).
func (r *Record) Layer(name string) *LayerResult {
	for i := range r.Layers {
		if r.Layers[i].Name == name {
			return &r.Layers[i]
		}
	}
	return nil
}

// newRecord starts the record of mutant m.
func newRecord(m *Mutant, profile string) *Record {
	return &Record{ID: m.ID(), File: m.File, Line: m.Line, Col: m.Col, Op: m.Op, Pkg: m.Pkg, Func: m.Func(),
		Before: m.Before, After: m.After, SrcSHA256: m.SrcSHA256, Profile: profile}
}

// ReadRecords reads a JSON Lines output file. A missing file has no
// records. A line that does not parse (a run killed mid-write leaves a torn
// last line) is skipped and reported in warnings with its file:line; it is
// never deleted.
func ReadRecords(path string) (recs []*Record, warnings []string, err error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	return readRecords(path, f)
}

func readRecords(name string, r io.Reader) (recs []*Record, warnings []string, err error) {
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var rec Record
			if jerr := json.Unmarshal(line, &rec); jerr != nil || rec.ID == "" {
				warnings = append(warnings, fmt.Sprintf("%s:%d: not a mutant record, skipped: %.80q", name, n, line))
			} else {
				recs = append(recs, &rec)
			}
		}
		if err == io.EOF {
			return recs, warnings, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
	}
}

// recordWriter appends records to the output file, one write per record,
// so a killed run loses at most the mutants still running.
type recordWriter struct {
	f *os.File
}

// openRecords opens path for appending. If the file ends without a newline
// (a torn line), one is added first so the next record starts on its own
// line; nothing already in the file is changed.
func openRecords(path string) (*recordWriter, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err != nil {
			f.Close()
			return nil, err
		}
		if last[0] != '\n' {
			if _, err := f.Write([]byte("\n")); err != nil {
				f.Close()
				return nil, err
			}
		}
	}
	return &recordWriter{f: f}, nil
}

func (w *recordWriter) write(r *Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.f.Write(append(b, '\n'))
	return err
}

func (w *recordWriter) close() error {
	if err := w.f.Sync(); err != nil {
		w.f.Close()
		return err
	}
	return w.f.Close()
}
