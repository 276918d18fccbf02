package mcp

import (
	"strings"
	"testing"
)

// TestTopScan: the top-level scan finds a response's id whatever is nested
// below it (strings holding brackets and escaped quotes included), in a
// message cut short, and refuses what is no response: a request, a
// notification, a log line with an id, an array, a broken prefix.
func TestTopScan(t *testing.T) {
	deep := strings.Repeat(`{"a":[`, 5000)
	for _, tc := range []struct {
		msg string
		id  string // "" for no response
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{}}`, "7"},
		{` { "jsonrpc" : "2.0" , "id" : "req-\"1\"" , "error" : {"code":1} } `, `"req-\"1\""`},
		{`{"jsonrpc":"2.0","result":{"t":"}]\"{["},"id":12}`, "12"},
		{`{"jsonrpc":"2.0","id":3,"result":` + deep, "3"},           // cut short, deep
		{`{"result":` + deep + `,"jsonrpc":"2.0","id":4`, ""},       // the id is beyond the cut
		{`{"jsonrpc":"2.0","id":5,"method":"ping"}`, ""},            // a request
		{`{"jsonrpc":"2.0","method":"notifications/progress"}`, ""}, // a notification
		{`{"level":"error","id":3,"error":"db failed"}`, ""},        // a log line
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700}}`, ""}, // no request's id
		{`{"jsonrpc":"2.0","id":{"x":1},"result":{}}`, ""},          // not an id
		{`[{"jsonrpc":"2.0","id":1,"result":{}}]`, ""},              // a batch
		{`{"jsonrpc":"2.0" "id":1,"result":{}}`, ""},                // broken before the id
		{`{"jsonrpc":"2.0","id":8,"result":{}} trailing`, "8"},
	} {
		id, ok := responseID([]byte(tc.msg))
		if ok != (tc.id != "") || id != tc.id {
			t.Errorf("%.80s: id %q %v, want %q", tc.msg, id, ok, tc.id)
		}
	}
}
