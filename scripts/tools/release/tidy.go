package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// tidy runs go mod tidy in the modules of the working tree (all, or those
// in only) as it runs for a module on its own: with GOWORK=off, against a
// module proxy on disk that serves our modules at the release version from
// the working tree. Inside the workspace go mod tidy cannot run: it reads
// no go.work, and the release version is not published. It then drops the
// go.sum lines of our own modules, which nothing needs and which could not
// match the zips of the tags. With check it changes nothing and fails if
// a module is not tidy.
func tidy(repo string, check bool, only []string, out io.Writer) error {
	top, mods, dirs, err := workingModules(repo)
	if err != nil {
		return err
	}
	version, err := workingVersion(mods, dirs)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "releasetidy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	proxyDir := filepath.Join(tmp, "proxy")
	rootPath := ""
	for _, m := range mods {
		if m.dir == "." {
			rootPath = m.f.Module.Mod.Path
		}
		mv := module.Version{Path: m.f.Module.Mod.Path, Version: version}
		dir := filepath.Join(top, filepath.FromSlash(m.dir))
		if _, err := writeProxyModule(proxyDir, mv, time.Now().UTC(), m.data, func(w io.Writer) error {
			return modzip.CreateFromDir(w, mv, dir)
		}); err != nil {
			return err
		}
	}
	u, err := newUser(tmp, proxyDir, rootPath)
	if err != nil {
		return err
	}

	untidy := 0
	for _, m := range mods {
		if len(only) > 0 && !slices.Contains(only, m.dir) {
			continue
		}
		changed, err := tidyModule(u, m, dirs, check, out)
		if err != nil {
			return err
		}
		if changed {
			untidy++
		}
	}
	switch {
	case check && untidy > 0:
		fmt.Fprintf(out, "tidy FAILED: go mod tidy would change %d module(s); run scripts/release.sh tidy\n", untidy)
		return errFailed
	case check:
		fmt.Fprintf(out, "tidy: every module's go.mod and go.sum are tidy, outside the workspace, at %s\n", version)
	}
	return nil
}

// tidyModule tidies one module and says whether that changed it. With
// check, it puts the files back as they were.
func tidyModule(u *user, m modFile, ours map[string]string, check bool, out io.Writer) (bool, error) {
	dir := filepath.Dir(m.name)
	sumName := filepath.Join(dir, "go.sum")
	oldSum, err := os.ReadFile(sumName)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	hadSum := err == nil
	restore := func() error {
		if err := os.WriteFile(m.name, m.data, 0o644); err != nil {
			return err
		}
		if !hadSum {
			err := os.Remove(sumName)
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		return os.WriteFile(sumName, oldSum, 0o644)
	}
	if got, err := u.goCmd(dir, "mod", "tidy"); err != nil {
		return false, errors.Join(fmt.Errorf("go mod tidy in %s: %v\n%s", m.dir, err, indent(got)), restore())
	}
	newMod, err := os.ReadFile(m.name)
	if err != nil {
		return false, errors.Join(err, restore())
	}
	newSum, err := os.ReadFile(sumName)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, errors.Join(err, restore())
	}
	newSum = withoutOurs(newSum, ours)
	changed := !bytes.Equal(newMod, m.data) || !bytes.Equal(newSum, oldSum)
	if check || !changed {
		if err := restore(); err != nil {
			return false, err
		}
	} else if len(newSum) > 0 {
		if err := os.WriteFile(sumName, newSum, 0o644); err != nil {
			return false, err
		}
	} else if err := os.Remove(sumName); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	switch {
	case changed && check:
		fmt.Fprintf(out, "%s: not tidy\n%s%s", m.dir, lineDiff(filepath.Join(m.dir, "go.mod"), m.data, newMod), lineDiff(filepath.Join(m.dir, "go.sum"), oldSum, newSum))
	case changed:
		fmt.Fprintf(out, "tidied %s\n", m.dir)
	}
	return changed, nil
}

// workingVersion is the one version at which the working tree's modules
// require each other.
func workingVersion(mods []modFile, ours map[string]string) (string, error) {
	versions := map[string]bool{}
	for _, m := range mods {
		for _, r := range m.f.Require {
			if _, ok := ours[r.Mod.Path]; ok {
				versions[r.Mod.Version] = true
			}
		}
	}
	if len(versions) != 1 {
		return "", fmt.Errorf("the modules require each other at %d versions, want one: run scripts/release.sh set-version", len(versions))
	}
	for v := range versions {
		if err := checkRelease(v); err != nil {
			return "", fmt.Errorf("the modules require each other at %s: %v", v, err)
		}
		return v, nil
	}
	panic("unreachable")
}

// withoutOurs drops the go.sum lines of our own modules.
func withoutOurs(sum []byte, ours map[string]string) []byte {
	var b bytes.Buffer
	for _, line := range strings.SplitAfter(string(sum), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			if _, ok := ours[f[0]]; ok {
				continue
			}
		}
		b.WriteString(line)
	}
	return b.Bytes()
}

// lineDiff lists the lines that only old or only new has.
func lineDiff(name string, old, new []byte) string {
	oldLines := strings.Split(string(old), "\n")
	newLines := strings.Split(string(new), "\n")
	var b strings.Builder
	for _, l := range oldLines {
		if l != "" && !slices.Contains(newLines, l) {
			fmt.Fprintf(&b, "  %s: - %s\n", name, l)
		}
	}
	for _, l := range newLines {
		if l != "" && !slices.Contains(oldLines, l) {
			fmt.Fprintf(&b, "  %s: + %s\n", name, l)
		}
	}
	return b.String()
}
