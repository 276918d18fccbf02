package session

import (
	"fmt"
	"os"
	"regexp"
	"testing"
)

// TestDocsSessionFormat: the session file's header, as the guide to live
// runs shows it, carries the format this build writes.
func TestDocsSessionFormat(t *testing.T) {
	const path = "../../docs/live.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	headers := regexp.MustCompile(`\{"type":"session","format":(\d+)`).FindAllSubmatch(doc, -1)
	if len(headers) == 0 {
		t.Fatalf("%s shows no session header", path)
	}
	for _, h := range headers {
		if string(h[1]) != fmt.Sprint(Format) {
			t.Errorf("%s shows a session header of format %s; this build writes format %d", path, h[1], Format)
		}
	}
}
