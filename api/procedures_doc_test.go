package api_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/api"
)

// The role table of docs/security.md and docs/procedures.md are made
// from the procedure table; LEASEHOLD_WRITE_DOCS=1 writes them anew.
func TestDocsShowTheProcedureTable(t *testing.T) {
	for _, d := range []struct{ file, name, text string }{
		{"../docs/security.md", "roles", rolesTable()},
		{"../docs/procedures.md", "procedures", proceduresTable()},
	} {
		b, err := os.ReadFile(d.file)
		if err != nil {
			t.Fatal(err)
		}
		begin, end := "<!-- "+d.name+" table: made from api/procedures.go -->\n", "<!-- end of the "+d.name+" table -->"
		i, j := strings.Index(string(b), begin), strings.Index(string(b), end)
		if i < 0 || j < i {
			t.Fatalf("%s has no %q ... %q block", d.file, begin, end)
		}
		got := string(b[i+len(begin) : j])
		if got == d.text {
			continue
		}
		if os.Getenv("LEASEHOLD_WRITE_DOCS") == "1" {
			if err := os.WriteFile(d.file, []byte(string(b[:i+len(begin)])+d.text+string(b[j:])), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s's %s table is not the procedure table's; run LEASEHOLD_WRITE_DOCS=1 go test ./api -run TestDocs. Want:\n%s", d.file, d.name, d.text)
	}
}

// rolesTable is, per service, the calls each role adds.
func rolesTable() string {
	var b strings.Builder
	b.WriteString("| Service | worker | operator adds | admin adds |\n| --- | --- | --- | --- |\n")
	var order []string
	byService := map[string]map[api.Role][]string{}
	for _, p := range api.Procedures() {
		s := strings.TrimPrefix(p.Service(), "leasehold.v1.")
		if byService[s] == nil {
			order = append(order, s)
			byService[s] = map[api.Role][]string{}
		}
		byService[s][p.Role] = append(byService[s][p.Role], p.Method())
	}
	for _, s := range order {
		fmt.Fprintf(&b, "| %s |", s)
		for _, r := range []api.Role{api.RoleWorker, api.RoleOperator, api.RoleAdmin} {
			fmt.Fprintf(&b, " %s |", orDash(strings.Join(byService[s][r], ", ")))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// proceduresTable is the whole table, a row per procedure.
func proceduresTable() string {
	var b strings.Builder
	b.WriteString("| Procedure | Role | A token's prefixes are checked on | Answered by | Session stream | Rate | Retry |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, p := range api.Procedures() {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s |\n",
			p.Short(), p.Role, p.Scope.Doc(), p.Route, p.Session, p.Rate, p.Retry)
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
