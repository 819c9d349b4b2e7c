package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"

	"golang.org/x/mod/modfile"
)

// modFile is a go.mod file of the working tree.
type modFile struct {
	name string // file name
	dir  string // slash path from the repository root; "." for the root
	data []byte
	f    *modfile.File
}

// workingModules reads the go.mod files that git tracks in the working
// tree of repo. It returns the repository's top directory, the modules
// and their directories by module path.
func workingModules(repo string) (string, []modFile, map[string]string, error) {
	top, err := git(repo, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", nil, nil, err
	}
	names, err := gitBytes(top, "ls-files", "-z", "--", "*go.mod")
	if err != nil {
		return "", nil, nil, err
	}
	var mods []modFile
	dirs := map[string]string{}
	for _, name := range bytes.Split(bytes.TrimRight(names, "\x00"), []byte{0}) {
		if path.Base(string(name)) != "go.mod" {
			continue
		}
		file := filepath.Join(top, filepath.FromSlash(string(name)))
		data, err := os.ReadFile(file)
		if err != nil {
			return "", nil, nil, err
		}
		f, err := modfile.Parse(file, data, nil)
		if err != nil {
			return "", nil, nil, err
		}
		if f.Module == nil {
			return "", nil, nil, fmt.Errorf("%s: no module line", file)
		}
		dir := path.Dir(string(name))
		mods = append(mods, modFile{name: file, dir: dir, data: data, f: f})
		dirs[f.Module.Mod.Path] = dir
	}
	return top, mods, dirs, nil
}

// setVersion rewrites, in the working tree, every requirement of one of
// the repository's modules on another to version, and the go.work's
// replacements to that version, each by the module's own directory.
func setVersion(repo, version string, out io.Writer) error {
	if err := checkRelease(version); err != nil {
		return fmt.Errorf("%s: %v", version, err)
	}
	top, mods, dirs, err := workingModules(repo)
	if err != nil {
		return err
	}

	required := map[string]bool{}
	for _, m := range mods {
		for _, r := range m.f.Require {
			if _, ours := dirs[r.Mod.Path]; ours {
				required[r.Mod.Path] = true
				if err := m.f.AddRequire(r.Mod.Path, version); err != nil {
					return err
				}
			}
		}
		m.f.Cleanup()
		data, err := m.f.Format()
		if err != nil {
			return err
		}
		if err := writeIfChanged(m.name, m.data, data, out); err != nil {
			return err
		}
	}

	workName := filepath.Join(top, "go.work")
	data, err := os.ReadFile(workName)
	if err != nil {
		return err
	}
	wf, err := modfile.ParseWork(workName, data, nil)
	if err != nil {
		return err
	}
	for _, r := range slices.Clone(wf.Replace) {
		if _, ours := dirs[r.Old.Path]; ours {
			if err := wf.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return err
			}
		}
	}
	for _, p := range sortedKeys(required) {
		dir := "./" + dirs[p]
		if dirs[p] == "." {
			dir = "./"
		}
		if err := wf.AddReplace(p, version, dir, ""); err != nil {
			return err
		}
	}
	wf.Cleanup()
	return writeIfChanged(workName, data, modfile.Format(wf.Syntax), out)
}

func writeIfChanged(name string, old, data []byte, out io.Writer) error {
	if bytes.Equal(old, data) {
		return nil
	}
	fmt.Fprintf(out, "updated %s\n", name)
	return os.WriteFile(name, data, 0o644)
}

func sortedKeys(m map[string]bool) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// printTags prints the git tag commands for the release version of rev.
func printTags(repo, rev string, unpublished []string, out io.Writer) error {
	t, err := readTree(repo, rev)
	if err != nil {
		return err
	}
	mods, err := t.modules(unpublished)
	if err != nil {
		return err
	}
	version, problems := lint(t, mods, "")
	if version == "" || len(problems) > 0 {
		return fmt.Errorf("commit %s is not ready for a release: run release check", short(t.commit))
	}
	for _, m := range mods {
		if m.published {
			fmt.Fprintf(out, "git tag -a %s%s -m %q %s\n", m.tagPrefix(), version, m.path()+" "+version, short(t.commit))
		}
	}
	fmt.Fprintf(out, "git push origin")
	for _, m := range mods {
		if m.published {
			fmt.Fprintf(out, " %s%s", m.tagPrefix(), version)
		}
	}
	fmt.Fprintln(out)
	return nil
}
