package client_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"testing"
)

// generatedAPI is the import path prefix of the generated protobuf and
// Connect code.
const generatedAPI = "github.com/leasehold/leasehold/api/gen/"

// TestExportedAPINamesNoGeneratedType: no exported identifier of package
// client (function, method, type, struct field, interface method,
// variable, constant) names a type from api/gen, so a caller never needs
// the generated API. It reads the package's source and follows every type
// expression reachable from the exported API, through the package's own
// unexported types too (and their exported methods), but not into
// unexported struct fields, which callers cannot see. (A type-check with
// go/types and the source importer says the same but takes half a minute
// under -race: it compiles every dependency from source.)
func TestExportedAPINamesNoGeneratedType(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg := pkgs["client"]
	if pkg == nil || len(pkg.Files) == 0 {
		t.Fatal("no source of package client found")
	}
	w := &apiWalker{t: t, fset: fset, types: map[string]*ast.TypeSpec{}, methods: map[string][]*ast.FuncDecl{}, seen: map[string]bool{}}
	for _, f := range pkg.Files {
		w.all = append(w.all, f)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						w.types[ts.Name.Name] = ts
						w.fileOf(ts, f)
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil {
					r := receiverName(d.Recv.List[0].Type)
					w.methods[r] = append(w.methods[r], d)
				}
			}
		}
	}
	for _, f := range pkg.Files {
		w.file = f
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				// Methods are followed with their type (typeNamed).
				if d.Name.IsExported() && d.Recv == nil {
					w.expr(d.Name.Name, d.Type)
					w.checked++
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							w.typeNamed(s.Name.Name)
							w.checked++
						}
					case *ast.ValueSpec:
						for i, n := range s.Names {
							if !n.IsExported() {
								continue
							}
							w.checked++
							w.expr(n.Name, s.Type)
							// An untyped declaration takes its value's type:
							// any generated name in the value counts.
							if s.Type == nil && i < len(s.Values) {
								w.expr(n.Name, s.Values[i])
							}
						}
					}
				}
			}
		}
	}
	if w.checked < 40 {
		t.Fatalf("only %d exported identifiers checked: the walk misses the API", w.checked)
	}
}

// apiWalker follows type expressions from the exported API.
type apiWalker struct {
	t       *testing.T
	fset    *token.FileSet
	file    *ast.File                   // the file whose imports resolve names now
	types   map[string]*ast.TypeSpec    // every type declared in the package
	methods map[string][]*ast.FuncDecl  // by receiver type name
	files   map[*ast.TypeSpec]*ast.File // where each type is declared
	all     []*ast.File
	seen    map[string]bool // types already followed
	checked int
}

func (w *apiWalker) fileOf(ts *ast.TypeSpec, f *ast.File) {
	if w.files == nil {
		w.files = map[*ast.TypeSpec]*ast.File{}
	}
	w.files[ts] = f
}

// typeNamed follows a type of the package: its definition and its exported
// methods, resolving names with the imports of the files they are in.
func (w *apiWalker) typeNamed(name string) {
	ts := w.types[name]
	if ts == nil || w.seen[name] {
		return
	}
	w.seen[name] = true
	saved := w.file
	defer func() { w.file = saved }()
	w.file = w.files[ts]
	w.expr(name, ts.Type)
	for _, m := range w.methods[name] {
		if m.Name.IsExported() {
			w.file = w.fileOfDecl(m)
			w.expr(name+"."+m.Name.Name, m.Type)
			w.checked++
		}
	}
}

func (w *apiWalker) fileOfDecl(d *ast.FuncDecl) *ast.File {
	for _, f := range w.all {
		if f.FileStart <= d.Pos() && d.Pos() < f.FileEnd {
			return f
		}
	}
	return w.file
}

// importPath is the path that name refers to in the current file, or "".
func (w *apiWalker) importPath(name string) string {
	for _, im := range w.file.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		local := path.Base(p)
		if im.Name != nil {
			local = im.Name.Name
		} else if strings.HasPrefix(local, "v") && len(local) <= 3 {
			// A versioned path such as .../leasehold/v1 is package leaseholdv1.
			local = path.Base(path.Dir(p)) + local
		}
		if local == name {
			return p
		}
	}
	return ""
}

func (w *apiWalker) expr(where string, e ast.Expr) {
	if e == nil {
		return
	}
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok {
				if p := w.importPath(x.Name); strings.HasPrefix(p, generatedAPI) {
					w.t.Errorf("%s: %s names %s.%s, a generated type", w.fset.Position(n.Pos()), where, p, n.Sel.Name)
				}
			}
			return false
		case *ast.Ident:
			w.typeNamed(n.Name)
		case *ast.StructType:
			for _, f := range n.Fields.List {
				if len(f.Names) == 0 { // embedded: visible if its type name is
					if ast.IsExported(receiverName(f.Type)) {
						w.expr(where, f.Type)
					}
					continue
				}
				for _, name := range f.Names {
					if name.IsExported() {
						w.expr(where+"."+name.Name, f.Type)
					}
				}
			}
			return false
		case *ast.InterfaceType:
			for _, m := range n.Methods.List {
				if len(m.Names) == 0 || m.Names[0].IsExported() {
					w.expr(where, m.Type)
				}
			}
			return false
		case *ast.FuncLit, *ast.BlockStmt:
			return false // bodies of values are not the API
		}
		return true
	})
}

// receiverName is the type name in a receiver or embedded field: T, *T,
// T[P], pkg.T.
func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}
