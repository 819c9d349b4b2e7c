package main

import (
	"archive/zip"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// tree is the committed tree of one revision, read with git archive as
// the go command and module proxies read a tagged revision.
type tree struct {
	commit string
	time   time.Time
	files  map[string]*zip.File // by slash path from the repository root
}

func readTree(repo, rev string) (*tree, error) {
	commit, err := git(repo, "rev-parse", "--verify", rev+"^{commit}")
	if err != nil {
		return nil, err
	}
	when, err := git(repo, "show", "-s", "--format=%cI", commit)
	if err != nil {
		return nil, err
	}
	t := &tree{commit: commit, files: map[string]*zip.File{}}
	if t.time, err = time.Parse(time.RFC3339, when); err != nil {
		return nil, fmt.Errorf("commit time of %s: %w", commit, err)
	}
	t.time = t.time.UTC()
	// The same line-ending settings as the go command's git archive.
	data, err := gitBytes(repo, "-c", "core.autocrlf=input", "-c", "core.eol=lf", "archive", "--format=zip", commit)
	if err != nil {
		return nil, err
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("git archive of %s: %w", commit, err)
	}
	for _, f := range zr.File {
		if !strings.HasSuffix(f.Name, "/") {
			t.files[f.Name] = f
		}
	}
	return t, nil
}

func (t *tree) read(name string) ([]byte, error) {
	f, ok := t.files[name]
	if !ok {
		return nil, fmt.Errorf("%s: not in commit %s", name, short(t.commit))
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// mod is one module of the tree.
type mod struct {
	dir       string // slash path from the repository root; "" for the root
	file      *modfile.File
	gomod     []byte
	published bool
	libs      []string // importable packages that are not commands
	cmds      []string // main packages under a cmd directory
}

func (m *mod) path() string { return m.file.Module.Mod.Path }

// label is the module's directory as the docs write it.
func (m *mod) label() string {
	if m.dir == "" {
		return "."
	}
	return m.dir
}

// tagPrefix is the prefix of the module's git tags: "" or "dir/".
func (m *mod) tagPrefix() string {
	if m.dir == "" {
		return ""
	}
	return m.dir + "/"
}

// modules returns every module of the tree, the root first, then by
// directory.
func (t *tree) modules(unpublished []string) ([]*mod, error) {
	var mods []*mod
	for name := range t.files {
		if path.Base(name) != "go.mod" {
			continue
		}
		data, err := t.read(name)
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(name, data, nil)
		if err != nil {
			return nil, err
		}
		if f.Module == nil {
			return nil, fmt.Errorf("%s: no module line", name)
		}
		dir := path.Dir(name)
		if dir == "." {
			dir = ""
		}
		mods = append(mods, &mod{dir: dir, file: f, gomod: data, published: !slices.Contains(unpublished, dir)})
	}
	slices.SortFunc(mods, func(a, b *mod) int { return strings.Compare(a.dir, b.dir) })
	if len(mods) == 0 || mods[0].dir != "" {
		return nil, fmt.Errorf("commit %s has no go.mod at its root", short(t.commit))
	}
	return mods, nil
}

// zipFiles returns the files that go into m's module zip, before the
// zip package drops nested modules, vendor directories and the like. A
// module in a subdirectory without a LICENSE gets the root's, as the go
// command does.
func (t *tree) zipFiles(m *mod) []modzip.File {
	prefix := m.tagPrefix()
	var files []modzip.File
	haveLicense := false
	for name, f := range t.files {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		rel := strings.TrimPrefix(name, prefix)
		files = append(files, treeFile{name: rel, f: f})
		haveLicense = haveLicense || rel == "LICENSE"
	}
	if lic, ok := t.files["LICENSE"]; ok && !haveLicense && prefix != "" {
		files = append(files, treeFile{name: "LICENSE", f: lic})
	}
	slices.SortFunc(files, func(a, b modzip.File) int { return strings.Compare(a.Path(), b.Path()) })
	return files
}

type treeFile struct {
	name string
	f    *zip.File
}

func (f treeFile) Path() string { return f.name }

func (f treeFile) Lstat() (os.FileInfo, error) { return f.f.FileInfo(), nil }

func (f treeFile) Open() (io.ReadCloser, error) { return f.f.Open() }

// findPackages fills in m's library packages and commands from the files
// that its module zip holds.
func (t *tree) findPackages(m *mod) error {
	files := t.zipFiles(m)
	checked, err := modzip.CheckFiles(files)
	if err != nil {
		return fmt.Errorf("module %s: %w", m.path(), err)
	}
	names := map[string]map[string]bool{} // package names by directory
	for _, name := range checked.Valid {
		dir, base := path.Split(name)
		dir = strings.TrimSuffix(dir, "/")
		if !strings.HasSuffix(base, ".go") || strings.HasSuffix(base, "_test.go") || !buildable(dir) {
			continue
		}
		data, err := t.read(m.tagPrefix() + name)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, data, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if ignored(f.Comments, f.Package) {
			continue
		}
		if names[dir] == nil {
			names[dir] = map[string]bool{}
		}
		names[dir][f.Name.Name] = true
	}
	for dir, pkgNames := range names {
		importPath := m.path()
		if dir != "" {
			importPath += "/" + dir
		}
		if isInternal(importPath) || pkgNames["documentation"] && len(pkgNames) == 1 {
			continue
		}
		switch {
		case !pkgNames["main"] || len(pkgNames) > 1:
			m.libs = append(m.libs, importPath)
		case slices.Contains(strings.Split(importPath, "/"), "cmd"):
			m.cmds = append(m.cmds, importPath)
		}
		// Other main packages are examples: nothing to install.
	}
	slices.Sort(m.libs)
	slices.Sort(m.cmds)
	return nil
}

// buildable says whether the go command looks for packages in dir.
func buildable(dir string) bool {
	if dir == "" {
		return true
	}
	for _, elem := range strings.Split(dir, "/") {
		if elem == "testdata" || strings.HasPrefix(elem, ".") || strings.HasPrefix(elem, "_") {
			return false
		}
	}
	return true
}

// ignored says whether a file is excluded from every build with
// //go:build ignore (a generator, say).
func ignored(comments []*ast.CommentGroup, pkg token.Pos) bool {
	for _, g := range comments {
		if g.Pos() > pkg {
			break
		}
		for _, c := range g.List {
			if strings.TrimSpace(c.Text) == "//go:build ignore" {
				return true
			}
		}
	}
	return false
}

func isInternal(importPath string) bool {
	for _, elem := range strings.Split(importPath, "/") {
		if elem == "internal" {
			return true
		}
	}
	return false
}

// versionOf is module.Version for m at version v.
func versionOf(m *mod, v string) module.Version { return module.Version{Path: m.path(), Version: v} }

func git(repo string, args ...string) (string, error) {
	out, err := gitBytes(repo, args...)
	return strings.TrimSpace(string(out)), err
}

func gitBytes(repo string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
