package leasehold_test

import (
	"strings"
	"testing"
)

func TestExamplesAreTheShellBlocksWithTheirMarks(t *testing.T) {
	md := strings.Join([]string{
		"```sh",
		"echo one   # out",
		"```",
		"```go",
		"fmt.Println()",
		"```",
		"<!-- not-run: needs a cluster -->",
		"```bash",
		"leasehold cluster status",
		"```",
		"```console",
		"$ echo a \\",
		"  b",
		"a b",
		"$ true",
		"```",
	}, "\n")
	got, err := examples("x.md", md)
	if err != nil {
		t.Fatal(err)
	}
	want := []example{
		{file: "x.md", line: 1, script: "echo one   # out\n"},
		{file: "x.md", line: 8, script: "leasehold cluster status\n", skip: "needs a cluster"},
		{file: "x.md", line: 11, script: "echo a \\\n  b\ntrue\n"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d blocks %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("block %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestANotRunMarkNeedsAReasonAndABlock(t *testing.T) {
	for name, md := range map[string]string{
		"no reason":    "<!-- not-run -->\n```sh\ntrue\n```\n",
		"empty reason": "<!-- not-run:  -->\n```sh\ntrue\n```\n",
		"no block":     "<!-- not-run: why -->\ntext\n```sh\ntrue\n```\n",
		"unclosed":     "```sh\ntrue\n",
	} {
		if _, err := examples("x.md", md); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
