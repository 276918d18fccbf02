package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/escapement/escapement/kernel"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func parseAt(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad time %q: %w", s, err)
	}
	return d, nil
}

// appendJSONHTML appends s exactly as json.Marshal writes a string: as
// kernel.AppendJSONString does, and '<', '>', '&' escaped too.
func appendJSONHTML(b []byte, s string) []byte {
	if !strings.ContainsAny(s, "<>&") {
		return kernel.AppendJSONString(b, s)
	}
	j, err := json.Marshal(s)
	if err != nil {
		panic("sim: a string does not marshal: " + err.Error()) // json.Marshal never fails on a string
	}
	return append(b, j...)
}

// argsJSON renders call arguments exactly as json.Marshal does (keys
// sorted). Every run renders every call's arguments twice (the trace
// header's scenario, the model's stream), so the flat maps of strings,
// integers and booleans that scenarios hold skip reflection; anything else
// goes to json.Marshal. TestArgsJSON compares the two.
func argsJSON(m map[string]any) ([]byte, error) {
	return appendArgsJSON(make([]byte, 0, 64), m)
}

// appendArgsJSON is argsJSON appending to b.
func appendArgsJSON(b []byte, m map[string]any) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	var small [8]string
	keys := small[:0]
	for k := range m { // determinism: the keys are sorted before use
		keys = append(keys, k)
	}
	slices.Sort(keys)
	start := len(b)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONHTML(b, k)
		b = append(b, ':')
		switch v := m[k].(type) {
		case string:
			b = appendJSONHTML(b, v)
		case int:
			b = strconv.AppendInt(b, int64(v), 10)
		case bool:
			b = strconv.AppendBool(b, v)
		case nil:
			b = append(b, "null"...)
		default:
			j, err := json.Marshal(m)
			return append(b[:start], j...), err
		}
	}
	return append(b, '}'), nil
}
