package retry_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// layers are the root package's files, lowest first: a file may name
// what a file before it declares (a type, function, method, field,
// variable or constant), never what one after it does, so that the
// package reads bottom up and no files reference each other in a circle.
// A new file takes its place here.
var layers = [][]string{
	// Vocabulary: what a call is made of and says, with no settings.
	{"metrics.go", "handoff.go", "errors.go", "chain.go", "option.go", "backoff.go", "jitter.go",
		"deadletter.go", "idempotency.go", "idempotency_errors.go", "overload.go", "hedge.go"},
	// Settings: the Retrier's config and the options that set it.
	{"deadletter_options.go", "idempotency_options.go", "handoff_options.go", "options.go", "clock.go",
		"idempotency_key.go"},
	// Policy: the loop's state and the pure decision after an attempt.
	{"policy.go", "hook.go"},
	// Features: the attempt hooks' one path (attempt.go), then each
	// feature's hook of the seam in hook.go.
	{"attempt.go", "timeout.go", "idempotency_renew.go", "idempotency_store.go", "idempotency_do.go", "handoff_hook.go",
		"pause.go", "guard.go", "deadletter_record.go", "observe.go"},
	// Engine: the hedged round's hedges, the hooks' dispatcher (an
	// attempt, plain or hedged), the loop.
	{"hedge_round.go", "hooks.go", "engine.go"},
	// Entry points.
	{"retry.go", "name.go", "wait.go", "redrive.go", "doc.go"},
}

// TestLayers fails when a root file names what a file above it declares.
func TestLayers(t *testing.T) {
	rank := map[string]int{}
	for _, layer := range layers {
		for _, f := range layer {
			rank[f] = len(rank)
		}
	}
	for _, r := range fileReferences(t, ".") {
		from, to := r[0], r[1]
		_, knownFrom := rank[from]
		_, knownTo := rank[to]
		require.True(t, knownFrom && knownTo, "%s or %s is in no layer: give it its place in layers", from, to)
		assert.LessOrEqual(t, rank[to], rank[from], "%s names what %s declares, above it: move that below %s", from, to, from)
	}
}

// fileReferences returns each pair of root files (from, to) such that
// from names a package-level object, method or field that to declares.
func fileReferences(t *testing.T, dir string) [][2]string {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		files = append(files, f)
	}
	// Imported packages are left empty: only the package's own names
	// matter here, and type-checking the standard library from source
	// would take seconds. The errors that leaves are about imported names.
	conf := types.Config{Importer: emptyImporter{}, Error: func(error) {}}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	pkg, _ := conf.Check("github.com/steadfast-go/retry", fset, files, info)
	seen := map[[2]string]bool{}
	var refs [][2]string
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !obj.Pos().IsValid() || !declaredAtPackageLevel(pkg, obj) {
			continue
		}
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(obj.Pos()).Filename)
		if e := [2]string{from, to}; from != to && !seen[e] {
			seen[e] = true
			refs = append(refs, e)
		}
	}
	return refs
}

// emptyImporter imports every package as an empty one.
type emptyImporter struct{}

func (emptyImporter) Import(path string) (*types.Package, error) {
	p := types.NewPackage(path, path[strings.LastIndex(path, "/")+1:])
	p.MarkComplete()
	return p, nil
}

// declaredAtPackageLevel says whether obj is a package-level name, a
// method or a field: what one file can declare for another.
func declaredAtPackageLevel(pkg *types.Package, obj types.Object) bool {
	switch o := obj.(type) {
	case *types.Var:
		return o.IsField() || o.Parent() == pkg.Scope()
	case *types.Func:
		return o.Signature().Recv() != nil || o.Parent() == pkg.Scope()
	case *types.TypeName, *types.Const:
		return o.Parent() == pkg.Scope()
	}
	return false
}
