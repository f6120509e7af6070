package leasehold_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	linkScheme = regexp.MustCompile(`^[a-z]+:`)
)

// docAnchors are the anchors of a markdown text's headings, as GitHub
// makes them: outside code blocks, a repeated one numbered -1, -2, ...
func docAnchors(text string) map[string]bool {
	anchors, seen := map[string]bool{}, map[string]int{}
	for _, line := range proseLines(text) {
		m := mdHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := anchorOf(m[1])
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}

// proseLines are a markdown text's lines outside fenced code blocks.
func proseLines(text string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

// brokenLinks lists the relative links of the markdown file that name no
// file or directory of the repository, or no heading of the markdown file
// they point into.
func brokenLinks(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var broken []string
	for _, line := range proseLines(string(b)) {
		for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			target := m[1]
			if linkScheme.MatchString(target) {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
			}
			if _, err := os.Stat(dest); err != nil {
				broken = append(broken, fmt.Sprintf("%s links %s: no such file", file, target))
				continue
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				broken = append(broken, fmt.Sprintf("%s links %s: an anchor into a file that is not markdown", file, target))
				continue
			}
			text, err := os.ReadFile(dest)
			if err != nil {
				return nil, err
			}
			if !docAnchors(string(text))[frag] {
				broken = append(broken, fmt.Sprintf("%s links %s: %s has no heading with the anchor #%s", file, target, dest, frag))
			}
		}
	}
	return broken, nil
}

// docFiles are the README and every markdown file under docs/, the
// generated CLI reference included.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	for _, pattern := range []string{"docs/*.md", "docs/cli/*.md"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}

// Every relative link of the README and docs/ names a file that exists
// and, with an #anchor, a heading of it: the README's sections moved into
// docs/, and a link left pointing at the old place fails here.
func TestDocsLinksResolve(t *testing.T) {
	for _, f := range docFiles(t) {
		broken, err := brokenLinks(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range broken {
			t.Error(b)
		}
	}
}

// The checker itself: a link to a missing file, a missing heading, or a
// heading's second copy without its -1 fails; the right ones pass.
func TestBrokenLinksFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("b.md", "# B\n\n## Same\n\n## Same\n\n```sh\n# not a heading\n```\n")
	a := write("a.md", "# A: `x`\n\n[ok](#a-x) [ok](b.md) [ok](b.md#same-1) `[code](nowhere.md)`\n"+
		"[gone](c.md) [no heading](b.md#other) [code block](b.md#not-a-heading) [self](#b)\n"+
		"```sh\n[in a block](nowhere.md)\n```\n[web](https://example.com/x#y)\n")
	broken, err := brokenLinks(a)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"c.md", "b.md#other", "b.md#not-a-heading", "#b"}
	if len(broken) != len(want) {
		t.Fatalf("broken links %q, want those of %q", broken, want)
	}
	for i, w := range want {
		if !strings.Contains(broken[i], " links "+w+":") {
			t.Errorf("broken link %d is %q, want %s", i, broken[i], w)
		}
	}
}
