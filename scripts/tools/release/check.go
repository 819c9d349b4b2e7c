package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

type checkConfig struct {
	repo, rev, version string
	baseline           string // the commit after which commit messages are checked, before the first tag
	unpublished        []string
	keep               bool
}

func check(cfg checkConfig, out io.Writer) error {
	t, err := readTree(cfg.repo, cfg.rev)
	if err != nil {
		return err
	}
	mods, err := t.modules(cfg.unpublished)
	if err != nil {
		return err
	}
	version, problems := lint(t, mods, cfg.version)
	commits, commitProblems := lintCommits(cfg.repo, t.commit, cfg.baseline)
	problems = append(problems, commitProblems...)
	var published []*mod
	for _, m := range mods {
		if m.published {
			published = append(published, m)
		}
	}
	shown := version
	if shown == "" {
		shown = "(no version)"
	}
	var kept []string
	for _, m := range mods {
		if !m.published {
			kept = append(kept, m.label())
		}
	}
	fmt.Fprintf(out, "release check: %d modules at %s, from commit %s (%s); not released: %s\n",
		len(published), shown, short(t.commit), cfg.rev, strings.Join(kept, ", "))
	if commits != "" {
		fmt.Fprintf(out, "  %s\n", commits)
	}
	for _, p := range problems {
		fmt.Fprintf(out, "  problem: %s\n", p)
	}
	if version == "" {
		fmt.Fprintf(out, "release check FAILED: %d problem(s), and no version to install\n", len(problems))
		return errFailed
	}

	tmp, err := os.MkdirTemp("", "releasecheck-")
	if err != nil {
		return err
	}
	if cfg.keep {
		fmt.Fprintf(out, "  temporary directory: %s\n", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	proxyDir := filepath.Join(tmp, "proxy")
	size := int64(0)
	for _, m := range published {
		if err := t.findPackages(m); err != nil {
			return err
		}
		n, err := writeModule(proxyDir, t, m, version)
		if err != nil {
			return err
		}
		size += n
	}
	fmt.Fprintf(out, "  proxy: %d modules, %d KiB of zips, written from the commit\n", len(published), size/1024)

	u, err := newUser(tmp, proxyDir, mods[0].path())
	if err != nil {
		return err
	}
	failures := len(problems)
	start := time.Now()
	step := func(what string, err error, detail string) {
		took := time.Since(start).Round(100 * time.Millisecond)
		start = time.Now()
		if err != nil {
			failures++
			fmt.Fprintf(out, "  FAIL %s (%s)\n%s", what, took, indent(detail))
			return
		}
		fmt.Fprintf(out, "  ok   %s%s (%s)\n", what, detail, took)
	}

	// Each library module alone, as its install line reads.
	var libs, libMods []string
	for _, m := range published {
		if len(m.libs) == 0 {
			continue
		}
		libs = append(libs, m.libs...)
		libMods = append(libMods, m.path()+"@"+version)
		dir, err := u.newModule("get" + strings.ReplaceAll(strings.TrimPrefix(m.label(), "."), "/", "-"))
		if err != nil {
			return err
		}
		got, err := u.goCmd(dir, "get", m.path()+"@"+version)
		step("go get "+m.path()+"@"+version, err, onFailure(got, err))
	}

	// One program importing every library package, built and run.
	if len(libs) > 0 {
		dir, err := u.newModule("program")
		if err != nil {
			return err
		}
		if got, err := u.goCmd(dir, append([]string{"get"}, libMods...)...); err != nil {
			step("go get of every library module", err, got)
		} else if err := os.WriteFile(filepath.Join(dir, "main.go"), program(mods[0].path(), libs), 0o644); err != nil {
			return err
		} else if got, err := u.goCmd(dir, "build", "-o", "program", "."); err != nil {
			step(fmt.Sprintf("go build of a program importing %d packages", len(libs)), err, got)
		} else {
			got, err := u.exec(dir, filepath.Join(dir, "program"))
			step(fmt.Sprintf("a program importing %d library packages builds and runs", len(libs)), err, onFailure(got, err))
		}
	}

	// Each command, at the version and at @latest, as its install line reads.
	for _, m := range published {
		for _, cmd := range m.cmds {
			installed := false
			for _, query := range []string{version, "latest"} {
				got, err := u.goCmd(u.home, "install", cmd+"@"+query)
				if err == nil {
					got, err = u.installedVersion(path.Base(cmd), m.path(), mods[0].path(), version)
				}
				installed = installed || err == nil
				step("go install "+cmd+"@"+query, err, onFailure(got, err))
			}
			if !installed {
				continue
			}
			bin := filepath.Join(u.bin, path.Base(cmd))
			got, err := u.exec(u.home, bin, "-h")
			if err == nil && !strings.Contains(strings.ToLower(got), "usage") {
				err = fmt.Errorf("no usage text")
			}
			step(path.Base(cmd)+" -h", err, firstLine(got, err))
		}
	}

	if failures > 0 {
		fmt.Fprintf(out, "release check FAILED: %d problem(s)\n", failures)
		return errFailed
	}
	var tags []string
	for _, m := range published {
		tags = append(tags, m.tagPrefix()+version)
	}
	fmt.Fprintf(out, "release check passed: once tagged %s at %s, the modules install as above\n", strings.Join(tags, " "), short(t.commit))
	return nil
}

// writeModule writes m at version v into the proxy directory in the
// layout of GOPROXY=file://dir and returns the size of its zip.
func writeModule(proxyDir string, t *tree, m *mod, v string) (int64, error) {
	return writeProxyModule(proxyDir, versionOf(m, v), t.time, m.gomod, func(w io.Writer) error {
		return modzip.Create(w, versionOf(m, v), t.zipFiles(m))
	})
}

// writeProxyModule writes the list, .info, .mod and .zip files of module
// version mv, and returns the size of the zip that writeZip writes.
func writeProxyModule(proxyDir string, mv module.Version, when time.Time, gomod []byte, writeZip func(io.Writer) error) (int64, error) {
	escaped, err := module.EscapePath(mv.Path)
	if err != nil {
		return 0, err
	}
	ev, err := module.EscapeVersion(mv.Version)
	if err != nil {
		return 0, err
	}
	dir := filepath.Join(proxyDir, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{mv.Version, when})
	if err != nil {
		return 0, err
	}
	for name, data := range map[string][]byte{"list": []byte(mv.Version + "\n"), ev + ".info": info, ev + ".mod": gomod} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return 0, err
		}
	}
	f, err := os.Create(filepath.Join(dir, ev+".zip"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := writeZip(f); err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), f.Close()
}

// program is a main package that imports every library package and
// makes one call through the root package.
func program(root string, libs []string) []byte {
	var b bytes.Buffer
	b.WriteString("// Code generated by release check. It imports every library package.\npackage main\n\nimport (\n\t\"context\"\n\t\"fmt\"\n\t\"os\"\n\n")
	fmt.Fprintf(&b, "\tretry %q\n", root)
	for _, p := range libs {
		if p != root {
			fmt.Fprintf(&b, "\t_ %q\n", p)
		}
	}
	b.WriteString(`)

func main() {
	calls := 0
	err := retry.Do(context.Background(), func(context.Context) error { calls++; return nil })
	if err != nil || calls != 1 {
		fmt.Println("retry.Do:", err, "after", calls, "calls")
		os.Exit(1)
	}
}
`)
	return b.Bytes()
}

// user is a new user's machine: a fresh module cache and GOPATH, no
// workspace, and the proxy on disk before any other.
type user struct {
	home, bin string
	env       []string
}

func newUser(tmp, proxyDir, root string) (*user, error) {
	u := &user{home: filepath.Join(tmp, "home"), bin: filepath.Join(tmp, "bin")}
	if err := os.MkdirAll(u.home, 0o755); err != nil {
		return nil, err
	}
	proxies := []string{fileURL(proxyDir)}
	// Modules other than ours come from the module cache already on this
	// machine when they are there, else from the usual proxy.
	if cache := goEnv("GOMODCACHE"); cache != "" {
		if dl := filepath.Join(cache, "cache", "download"); isDir(dl) {
			proxies = append(proxies, fileURL(dl))
		}
	}
	if upstream := goEnv("GOPROXY"); upstream != "" && upstream != "off" {
		proxies = append(proxies, upstream)
	}
	drop := []string{"GOWORK", "GOFLAGS", "GOPROXY", "GONOSUMDB", "GONOPROXY", "GOPRIVATE", "GOINSECURE", "GOMODCACHE", "GOPATH", "GOBIN", "GOENV"}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(drop, k) {
			u.env = append(u.env, kv)
		}
	}
	u.env = append(u.env,
		"GOWORK=off",
		// -trimpath keeps the build cache's entries valid across fresh
		// module caches, so a second check compiles little.
		"GOFLAGS=-modcacherw -trimpath",
		"GOPROXY="+strings.Join(proxies, ","),
		// The checksum database knows nothing of these zips; GOPRIVATE
		// would also bypass the proxy, so only GONOSUMDB is set.
		"GONOSUMDB="+root,
		"GOPRIVATE=",
		"GONOPROXY=",
		"GOENV=off",
		"GOMODCACHE="+filepath.Join(tmp, "modcache"),
		"GOPATH="+filepath.Join(tmp, "gopath"),
		"GOBIN="+u.bin,
	)
	return u, nil
}

// newModule makes a directory with a fresh go.mod.
func (u *user) newModule(name string) (string, error) {
	dir := filepath.Join(u.home, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if got, err := u.goCmd(dir, "mod", "init", "example.com/"+name); err != nil {
		return "", fmt.Errorf("go mod init: %v\n%s", err, got)
	}
	return dir, nil
}

func (u *user) goCmd(dir string, args ...string) (string, error) {
	return u.exec(dir, "go", args...)
}

func (u *user) exec(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = u.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// installedVersion checks with go version -m that the installed command
// is module modPath at version, built with every module under root at
// version too.
func (u *user) installedVersion(name, modPath, root, version string) (string, error) {
	got, err := u.goCmd(u.home, "version", "-m", filepath.Join(u.bin, name))
	if err != nil {
		return got, err
	}
	var wrong []string
	seenMain := false
	for _, line := range strings.Split(got, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || (f[0] != "mod" && f[0] != "dep") {
			continue
		}
		if f[1] == modPath {
			seenMain = true
		}
		if (f[1] == root || strings.HasPrefix(f[1], root+"/")) && f[2] != version {
			wrong = append(wrong, f[1]+" "+f[2])
		}
	}
	if !seenMain || len(wrong) > 0 {
		return got, fmt.Errorf("built from %v, want every module of ours at %s", wrong, version)
	}
	return "", nil
}

func goEnv(key string) string {
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func fileURL(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return "file://" + filepath.ToSlash(abs)
}

func isDir(dir string) bool {
	st, err := os.Stat(dir)
	return err == nil && st.IsDir()
}

func onFailure(got string, err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf("%s(%v)\n", got, err)
}

func firstLine(got string, err error) string {
	if err != nil {
		return onFailure(got, err)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(got), "\n")
	return ": " + line
}

// indent indents the go command's output, without its download notes.
func indent(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.HasPrefix(line, "go: downloading ") {
			continue
		}
		b.WriteString("       " + line + "\n")
	}
	return b.String()
}
