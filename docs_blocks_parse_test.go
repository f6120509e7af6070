package leasehold_test

import (
	"reflect"
	"strings"
	"testing"
	"time"
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
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("block %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestMarksAndIndentedBlocks(t *testing.T) {
	md := strings.Join([]string{
		"1. a step:",
		"",
		"   <!-- setup: leasehold acquire jobs/x -->",
		"   <!-- run-for: 2s -->",
		"   <!-- expect: granted -->",
		"   <!-- exit: 22 -->",
		"   ```sh",
		"   leasehold watch jobs/",
		"     # indented more",
		"   ```",
	}, "\n")
	got, err := examples("x.md", md)
	if err != nil {
		t.Fatal(err)
	}
	want := []example{{file: "x.md", line: 7, script: "leasehold watch jobs/\n  # indented more\n",
		setup: "leasehold acquire jobs/x\n", runFor: 2 * time.Second, expect: []string{"granted"}, exit: 22}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestShownOutputIsTheKeysAndEnumsOfJSONComments(t *testing.T) {
	got := shownOutput("curl x   # {\"step\":10}\n# {\"state\":\"IDEM_STATE_STARTED\",\"lease_id\": 4,...}\n# the same again: {\"other\":1}\n")
	want := []string{`"step"`, `"state"`, `"lease_id"`, `"IDEM_STATE_STARTED"`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestANotRunMarkNeedsAReasonAndABlock(t *testing.T) {
	for name, md := range map[string]string{
		"no reason":    "<!-- not-run -->\n```sh\ntrue\n```\n",
		"empty reason": "<!-- not-run:  -->\n```sh\ntrue\n```\n",
		"no block":     "<!-- not-run: why -->\ntext\n```sh\ntrue\n```\n",
		"unclosed":     "```sh\ntrue\n",
		"run-for text": "<!-- run-for: soon -->\n```sh\ntrue\n```\n",
		"exit 0":       "<!-- exit: 0 -->\n```sh\ntrue\n```\n",
		"a go block":   "<!-- expect: x -->\n```go\nx()\n```\n",
		"at the end":   "```sh\ntrue\n```\n<!-- setup: true -->\n",
		"unlabeled":    "```\nleasehold locks\n```\n",
	} {
		if _, err := examples("x.md", md); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
