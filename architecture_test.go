package leasehold_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/leasehold/leasehold"

// mayImport is docs/architecture.md's table: for each package (and the
// packages below it, unless listed themselves), the packages of this
// repository its non-test files may import, whichever module they are in.
// "api/leasehold" is the vocabulary (package leasehold), the domain types.
// Test files are free: tests may start whole nodes (but a client-side
// module's go.mod lists what its tests import too, so its node-starting
// tests live in tests/, in the root module).
var mayImport = map[string][]string{
	"api/leasehold":          {},
	"clock":                  {},
	"fsm":                    {"api/leasehold"},
	"cluster":                {"api/leasehold", "clock", "fsm"},
	"service":                {"api/leasehold", "cluster", "fsm"},
	"server":                 {"api/leasehold", "api", "service"}, // never fsm or cluster: the service is the boundary
	"api":                    {"api/leasehold", "api"},
	"client":                 {"api/leasehold", "api", "clock"}, // clock: Config.Clock, for fault tests of skewed clients
	"client/clientprom":      {"client"},
	"client/clientotel":      {"client"},
	"fence":                  {"api/leasehold", "fence"},
	"idempotency":            {"api/leasehold", "client"},
	"queue":                  {"api/leasehold", "client"},
	"groups":                 {"api/leasehold", "client"},
	"embed":                  {"api/leasehold", "cluster", "nodemetrics", "server", "service", "ui"},
	"nodemetrics":            {"api/leasehold", "cluster", "fsm", "service"},
	"ui":                     {"api/leasehold", "api"},
	"cmd/leasehold":          {"api/leasehold", "api", "client", "clock", "cluster", "embed", "groups", "server", "service", "cmd/leasehold/internal", "internal/watchdog", "internal/gctarget"},
	"cmd/leasehold/internal": {"api/leasehold", "api", "client", "cluster", "embed", "server"},
	"examples":               {"api/leasehold", "api", "client", "fence", "groups", "idempotency", "queue"},
	"benchmarks":             {"api/leasehold", "client"},
	"conformance":            {"api/leasehold", "client", "fence"}, // the Go driver and bench: the public client only
	"internal/watchdog":      {},
	"internal/gctarget":      {},
	"internal/freeport":      {},
	"internal/smalldisk":     {},
	"internal/testutil":      {"internal/freeport"},
	"internal/procs":         {"internal/freeport"}, // StartServeCluster picks the nodes' ports
	"internal/netfault":      {"internal/freeport"}, // a loopback lab's ports
	"internal/history":       {},
	"internal/pgtest":        {"internal/freeport"},
	"internal/testcluster":   {"api/leasehold", "api", "client", "cluster", "embed", "server", "service", "internal/testutil"},
	"integration":            {},
	"faults":                 {},
	"scripts":                {},
	"cmd/leasehold/internal/torture": {"api/leasehold", "client", "groups", "cmd/leasehold/internal/bench", "internal/history",
		"internal/netfault", "internal/freeport"},
}

// ruleFor is the entry of mayImport that governs pkg: its own, or its
// nearest listed parent's.
func ruleFor(pkg string) (string, bool) {
	if pkg == "." {
		return ".", true
	}
	for p := pkg; p != "."; p = filepath.ToSlash(filepath.Dir(p)) {
		if _, ok := mayImport[p]; ok {
			return p, true
		}
	}
	return "", false
}

// allowed reports whether imp (relative to the module) is one of allow, or
// below one of them.
func allowed(imp string, allow []string) bool {
	return slices.ContainsFunc(allow, func(a string) bool {
		return imp == a || (a != "." && strings.HasPrefix(imp, a+"/"))
	})
}

// The layering of docs/architecture.md holds: fsm imports only the domain
// types, the client nothing of the node, service no server, and nothing
// imports a command.
func TestPackagesImportOnlyWhatTheArchitectureAllows(t *testing.T) {
	imports := map[string]map[string]string{} // package -> import -> a file that makes it
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		for _, is := range f.Imports {
			imp, _ := strconv.Unquote(is.Path.Value)
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			rel := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			if rel == "" {
				rel = "."
			}
			if imports[pkg] == nil {
				imports[pkg] = map[string]string{}
			}
			imports[pkg][rel] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("fsm"); err != nil || len(imports) == 0 {
		t.Fatalf("run from the module root (found %d packages): %v", len(imports), err)
	}
	for pkg, imps := range imports {
		rule, ok := ruleFor(pkg)
		if !ok {
			t.Errorf("package %s is not in docs/architecture.md's table (mayImport): say what it may import", pkg)
			continue
		}
		for imp, file := range imps {
			if imp == pkg {
				continue
			}
			if !allowed(imp, mayImport[rule]) {
				t.Errorf("%s imports %s, which %s may not (see docs/architecture.md)", file, imp, rule)
			}
		}
	}
}
