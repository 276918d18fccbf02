package kernel

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/development.md, "Kernel transcripts", documents the files: its
// command table must list every command the driver knows, and its example
// must be what a transcript says today (a -rewrite that changes it shows
// here, so the docs are updated with it).

func developmentDoc(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(src), "\n## Kernel transcripts\n")
	if !ok {
		t.Fatal(`docs/development.md has no "## Kernel transcripts" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	return section
}

func TestTranscriptCommandsDocumented(t *testing.T) {
	doc := developmentDoc(t)
	for _, c := range transcriptCommands {
		if !regexp.MustCompile("(\\| |, )`" + c.name + "[` ]").MatchString(doc) {
			t.Errorf("docs/development.md, \"Kernel transcripts\": the command table does not list %s (%s)", c.name, c.usage)
		}
	}
	for _, want := range []string{"go test ./kernel -run TestTranscripts -rewrite", "# covers:"} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/development.md, \"Kernel transcripts\", does not say %q", want)
		}
	}
}

func TestTranscriptDocExampleIsCurrent(t *testing.T) {
	_, example, ok := strings.Cut(developmentDoc(t), "\n```\n")
	example, _, closed := strings.Cut(example, "\n```")
	if !ok || !closed {
		t.Fatal(`docs/development.md, "Kernel transcripts": no example block`)
	}
	files := transcriptFiles(t)
	if !slices.ContainsFunc(files, func(path string) bool {
		src, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(src), example+"\n")
	}) {
		t.Errorf("the example in docs/development.md, \"Kernel transcripts\", is in no transcript any more; copy it again from testdata/cancel-while-streaming.txt:\n%s", example)
	}
}
