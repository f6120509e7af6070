package leasehold_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	docTestName  = regexp.MustCompile("`([a-z0-9/]+)\\.(Test\\w+)`")
	testFunc     = regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	citedNumbers = regexp.MustCompile(`(?i)\binvariants?((?:,? (?:and )?\d+\b)+)`)
	docSection   = regexp.MustCompile(`(?m)^## (\d+)\. `)
	number       = regexp.MustCompile(`\d+`)
)

// docs/invariants.md defines every invariant the code cites by number, and
// every test it names as proof exists in the package it names.
func TestInvariantsDocNamesRealTests(t *testing.T) {
	doc, err := os.ReadFile("docs/invariants.md")
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, m := range docSection.FindAllStringSubmatch(string(doc), -1) {
		defined[m[1]] = true
	}

	tests := map[string]bool{} // "dir.TestName"
	cited := map[string]string{}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "gen") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, "_test.go") {
			for _, m := range testFunc.FindAllStringSubmatch(string(src), -1) {
				tests[filepath.ToSlash(filepath.Dir(path))+"."+m[1]] = true
			}
		}
		for _, m := range citedNumbers.FindAllStringSubmatch(string(src), -1) {
			for _, n := range number.FindAllString(m[1], -1) {
				cited[n] = path
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	names := docTestName.FindAllStringSubmatch(string(doc), -1)
	if len(names) == 0 {
		t.Fatal("docs/invariants.md names no tests")
	}
	for _, m := range names {
		if !tests[m[1]+"."+m[2]] {
			t.Errorf("docs/invariants.md names %s.%s, but %s/ has no such test function", m[1], m[2], m[1])
		}
	}
	for n, path := range cited {
		if !defined[n] {
			t.Errorf("%s cites invariant %s, which docs/invariants.md does not define", path, n)
		}
	}
	for n := range 9 {
		if !defined[string(rune('1'+n))] {
			t.Errorf("docs/invariants.md lacks invariant %d of the design", n+1)
		}
	}
}
