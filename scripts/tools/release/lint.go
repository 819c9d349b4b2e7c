package main

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// lint checks the go.mod files and the go.work of the tree. It returns
// the release version, want if it is set, else the one version at which
// the modules require each other, and the problems it found; the version
// is "" when there is none to check.
func lint(t *tree, mods []*mod, want string) (string, []string) {
	var problems []string
	addf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	root := mods[0].path()
	byPath := map[string]*mod{}
	for _, m := range mods {
		byPath[m.path()] = m
	}
	if want != "" {
		if err := checkRelease(want); err != nil {
			addf("-version %s: %v", want, err)
			want = ""
		}
	}

	versions := map[string][]string{} // release version -> "dir requires path"
	required := map[string]bool{}     // our module paths that some module requires
	for _, m := range mods {
		gomod := path.Join(m.dir, "go.mod")
		if wantPath := path.Join(root, m.dir); m.path() != wantPath {
			addf("%s: module %s, want %s (the path of its directory)", gomod, m.path(), wantPath)
		}
		if n := len(m.file.Replace); n > 0 {
			addf("%s: %d replace directive(s), for %s: go install pkg@version refuses them, and users never get them", gomod, n, replaced(m.file.Replace))
		}
		if n := len(m.file.Exclude); n > 0 {
			addf("%s: %d exclude directive(s): go install pkg@version refuses them", gomod, n)
		}
		for _, r := range m.file.Require {
			target, ours := byPath[r.Mod.Path]
			if !ours {
				if r.Mod.Path == root || strings.HasPrefix(r.Mod.Path, root+"/") {
					addf("%s: requires %s, which is no module of this repository", gomod, r.Mod.Path)
				}
				continue
			}
			required[r.Mod.Path] = true
			if m.published && !target.published {
				addf("%s: requires %s, which is not released", gomod, r.Mod.Path)
			}
			if err := checkRelease(r.Mod.Version); err != nil {
				addf("%s: requires %s %s: %v", gomod, r.Mod.Path, r.Mod.Version, err)
				continue
			}
			versions[r.Mod.Version] = append(versions[r.Mod.Version], fmt.Sprintf("%s requires %s", m.label(), r.Mod.Path))
		}
	}

	version := want
	switch found := slices.Sorted(maps.Keys(versions)); {
	case want != "":
		for _, v := range found {
			if v != want {
				addf("not at %s: %s %s", want, strings.Join(versions[v], ", "), v)
			}
		}
	case len(found) == 1:
		version = found[0]
	case len(found) > 1:
		var parts []string
		for _, v := range found {
			parts = append(parts, fmt.Sprintf("%s (%s)", v, strings.Join(versions[v], ", ")))
		}
		addf("the modules require each other at %d versions, want one: %s", len(found), strings.Join(parts, "; "))
	case len(problems) == 0:
		addf("no module requires another, so there is no release version to check: pass -version")
	}

	problems = append(problems, lintWork(t, mods, byPath, required, version)...)
	return version, problems
}

// placeholder is the version that go mod tidy writes for a requirement
// that only a replace directive satisfies.
const placeholder = "v0.0.0-00010101000000-000000000000"

// checkRelease says why v is no release version, or nil.
func checkRelease(v string) error {
	switch {
	case v == placeholder:
		return fmt.Errorf("a placeholder, an unknown revision to every user")
	case module.IsPseudoVersion(v):
		return fmt.Errorf("a pseudo-version, not a release")
	case !semver.IsValid(v) || semver.Canonical(v) != v || semver.Build(v) != "":
		return fmt.Errorf("not a canonical semantic version vX.Y.Z")
	}
	return nil
}

// lintWork checks the go.work: it uses every module, and replaces only
// our modules, each at the release version by its own directory, so that
// the workspace loads before that version is published.
func lintWork(t *tree, mods []*mod, byPath map[string]*mod, required map[string]bool, version string) []string {
	var problems []string
	addf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	data, err := t.read("go.work")
	if err != nil {
		return []string{"no go.work at the root: development and CI build every module from the workspace"}
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return []string{err.Error()}
	}
	used := map[string]bool{}
	for _, u := range wf.Use {
		dir := path.Clean(strings.TrimPrefix(u.Path, "./"))
		if dir == "." {
			dir = ""
		}
		used[dir] = true
	}
	for _, m := range mods {
		if !used[m.dir] {
			addf("go.work does not use ./%s", m.dir)
		}
		delete(used, m.dir)
	}
	for _, dir := range slices.Sorted(maps.Keys(used)) {
		addf("go.work uses ./%s, which has no go.mod in the commit", dir)
	}
	replacedAt := map[string]bool{}
	for _, r := range wf.Replace {
		m, ours := byPath[r.Old.Path]
		switch {
		case !ours:
			addf("go.work replaces %s: the workspace would build with code that users do not get", r.Old.Path)
		case r.Old.Version == "":
			addf("go.work replaces %s at every version; replace it at the release version only", r.Old.Path)
		case version != "" && r.Old.Version != version:
			addf("go.work replaces %s %s, not the release version %s: release set-version %s", r.Old.Path, r.Old.Version, version, version)
		case path.Clean(r.New.Path) != path.Clean("./"+m.dir):
			addf("go.work replaces %s with %s, not with its own directory ./%s", r.Old.Path, r.New.Path, m.dir)
		default:
			replacedAt[r.Old.Path] = true
		}
	}
	if version != "" {
		for _, p := range slices.Sorted(maps.Keys(required)) {
			if !replacedAt[p] {
				addf("go.work has no replace for %s %s: the workspace cannot load it before that version is published (release set-version %s adds it)", p, version, version)
			}
		}
	}
	return problems
}

func replaced(rs []*modfile.Replace) string {
	var paths []string
	for _, r := range rs {
		paths = append(paths, r.Old.Path)
	}
	return strings.Join(paths, ", ")
}
