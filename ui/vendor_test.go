package ui

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// vendored are the files web/build.sh copies from the npm package into
// static/vendor/uplot/, by their path in the package.
var vendored = map[string]string{
	"dist/uPlot.iife.min.js": "uPlot.iife.min.js",
	"dist/uPlot.min.css":     "uPlot.min.css",
	"LICENSE":                "LICENSE",
}

// The embedded uPlot is the version web/package-lock.json pins, byte for
// byte what web/build.sh copies from it: nobody edits it by hand. Without
// web/node_modules (npm ci in ui/web) only the version is checked, except
// in CI (CI=true), where .ci/run installs them and the bytes are compared.
func TestVendoredAssetsMatchTheLockfile(t *testing.T) {
	var lock struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	b, err := os.ReadFile("web/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		t.Fatalf("web/package-lock.json: %v", err)
	}
	want := lock.Packages["node_modules/uplot"].Version
	if want == "" {
		t.Fatal("web/package-lock.json pins no uplot")
	}
	var pkg struct{ Dependencies map[string]string }
	if b, err = os.ReadFile("web/package.json"); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatalf("web/package.json: %v", err)
	}
	if got := pkg.Dependencies["uplot"]; got != want {
		t.Errorf("web/package.json asks for uplot %q, the lockfile pins %s: pin the exact version and run web/build.sh", got, want)
	}
	js, err := os.ReadFile("static/vendor/uplot/uPlot.iife.min.js")
	if err != nil {
		t.Fatal(err)
	}
	if banner := "/*! https://github.com/leeoniya/uPlot (v" + want + ") */"; !bytes.HasPrefix(js, []byte(banner)) {
		t.Errorf("static/vendor/uplot/uPlot.iife.min.js does not start with %q: run web/build.sh", banner)
	}

	if _, err := os.Stat("web/node_modules/uplot"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("web/node_modules is missing: .ci/run runs npm ci in ui/web so this test can compare the vendored files")
		}
		t.Skip("web/node_modules is missing (npm ci in ui/web): only the version was checked")
	}
	var installed struct{ Version string }
	if b, err = os.ReadFile("web/node_modules/uplot/package.json"); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &installed); err != nil || installed.Version != want {
		t.Fatalf("web/node_modules has uplot %q (%v), the lockfile %s: run npm ci in ui/web", installed.Version, err, want)
	}
	for from, to := range vendored {
		src, err := os.ReadFile(filepath.Join("web/node_modules/uplot", from))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.ReadFile(filepath.Join("static/vendor/uplot", to))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(src, dst) {
			t.Errorf("static/vendor/uplot/%s differs from uplot %s's %s: run web/build.sh, do not edit it", to, want, from)
		}
	}
	// Nothing else sits in the vendor folder unchecked.
	entries, err := os.ReadDir("static/vendor/uplot")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") && !slices.Contains(slices.Collect(maps.Values(vendored)), e.Name()) {
			t.Errorf("static/vendor/uplot/%s is not one web/build.sh copies", e.Name())
		}
	}
}
