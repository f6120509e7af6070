package leasehold_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	exampleLink = regexp.MustCompile(`\]\((examples/[a-z0-9_-]+)\)`)
	docLink     = regexp.MustCompile(`\]\((docs/[a-z0-9_-]+\.md)#([a-z0-9_-]+)\)`)
	testFuncDef = regexp.MustCompile(`(?m)^func Test\w+\(t \*testing\.T\)`)
)

// Every row of the README's "Which primitive?" table links a runnable
// example (a main package under examples/) that has tests, which
// scripts/test runs; and its links into docs/ land on real headings.
func TestWhichPrimitiveExamplesExist(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Which primitive?\n")
	if !ok {
		t.Fatal(`README.md has no "## Which primitive?" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")

	rows := 0
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| Your problem") || strings.HasPrefix(line, "| ---") {
			continue
		}
		rows++
		examples := exampleLink.FindAllStringSubmatch(line, -1)
		if len(examples) == 0 {
			t.Errorf("a row links no example under examples/: %s", line)
		}
		for _, m := range examples {
			checkExample(t, m[1])
		}
		for _, m := range docLink.FindAllStringSubmatch(line, -1) {
			doc, err := os.ReadFile(m[1])
			if err != nil {
				t.Errorf("a row links %s#%s: %v", m[1], m[2], err)
			} else if !docAnchors(string(doc))[m[2]] {
				t.Errorf("a row links %s#%s, which is no heading of %s", m[1], m[2], m[1])
			}
		}
	}
	if rows < 5 {
		t.Errorf("the table has %d rows; want one per problem: idempotency, a single record race, ordered work per key, a singleton, a correctness-critical mutation", rows)
	}
}

// checkExample fails unless dir is a main package with at least one test.
func checkExample(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	isMain, tests := false, 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, "_test.go") {
			tests += len(testFuncDef.FindAll(b, -1))
		} else if regexp.MustCompile(`(?m)^package main$`).Match(b) {
			isMain = true
		}
	}
	switch {
	case len(files) == 0:
		t.Errorf("%s: no such example (no Go files)", dir)
	case !isMain:
		t.Errorf("%s is not a runnable example: no package main", dir)
	case tests == 0:
		t.Errorf("%s has no tests for CI to run", dir)
	}
}
