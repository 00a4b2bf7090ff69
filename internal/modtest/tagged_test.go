package modtest

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// published returns the folders of the modules a user can go get, as
// scripts/modules.sh --published lists them ("" for the root).
func published(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(root(t), "scripts", "modules.sh"), "--published")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/modules.sh --published: %v", err)
	}
	var dirs []string
	for _, d := range strings.Fields(string(out)) {
		dirs = append(dirs, strings.TrimPrefix(d, "."))
	}
	return dirs
}

// tagVersion is the version the checkout's modules are published at in
// the local proxy of TestTaggedModules: a pre-release no real tag has, new
// for each run, since the module cache keeps what it downloaded by version.
// Its last identifier is the time in nanoseconds: a numeric pre-release
// identifier may not start with 0 (semver), which the microseconds of a
// formatted time did about one run in ten ("...134320.057380").
var tagVersion = "v0.99.0-modtest." + strconv.FormatInt(time.Now().UnixNano(), 10)

// TestTaggedModules publishes the checkout's modules into a local module
// proxy as scripts/release.sh tags them (each go.mod requiring its wsmux
// siblings at the release's version, without the replace directives of
// development), then a user's module goes get each one and builds it with
// no replace directive of its own, and go install installs the command.
func TestTaggedModules(t *testing.T) {
	proxy := t.TempDir()
	for _, dir := range published(t) {
		publish(t, proxy, dir)
	}
	cache := strings.TrimSpace(goCmd(t, ".", nil, "env", "GOMODCACHE"))
	t.Cleanup(func() { forget(t, cache) })
	upstream := strings.TrimSpace(goCmd(t, ".", nil, "env", "GOPROXY"))
	env := []string{
		"GOPROXY=file://" + proxy + "," + upstream,
		"GONOSUMDB=github.com/wsmux/wsmux",
	}
	cases := []struct {
		module  string
		imports []string
	}{
		{"github.com/wsmux/wsmux", []string{"github.com/wsmux/wsmux/mux", "github.com/wsmux/wsmux/controller"}},
		{"github.com/wsmux/wsmux/adapters", []string{"github.com/wsmux/wsmux/adapters/httpstream", "github.com/wsmux/wsmux/adapters/bridge"}},
		{"github.com/wsmux/wsmux/gateway", []string{"github.com/wsmux/wsmux/gateway"}},
		{"github.com/wsmux/wsmux/bench", []string{"github.com/wsmux/wsmux/bench"}},
	}
	for _, c := range cases {
		t.Run(strings.TrimPrefix(c.module, "github.com/wsmux/"), func(t *testing.T) {
			dir := consumer(t, c.imports, "")
			goCmd(t, dir, env, "get", c.module+"@"+tagVersion)
			goCmd(t, dir, env, "mod", "tidy")
			goCmd(t, dir, env, "build", "./...")
			b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte("replace")) {
				t.Fatalf("the consumer needed a replace directive:\n%s", b)
			}
		})
	}
	t.Run("install", func(t *testing.T) {
		bin := t.TempDir()
		goCmd(t, t.TempDir(), append(env, "GOBIN="+bin), "install", "github.com/wsmux/wsmux/cmd/wsmux@"+tagVersion)
		out, err := exec.Command(filepath.Join(bin, "wsmux"), "--help").CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("gateway")) {
			t.Fatalf("the installed wsmux --help: %v\n%s", err, out)
		}
	})
}

// publish writes the module in folder dir of the checkout into proxy at
// tagVersion: its tracked files (not those of modules nested in it), its
// go.mod with the wsmux siblings it requires set to tagVersion.
func publish(t *testing.T, proxy, dir string) {
	t.Helper()
	src := filepath.Join(root(t), dir)
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse("go.mod", gomod, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if strings.HasPrefix(r.Mod.Path, "github.com/wsmux/wsmux") {
			if err := f.AddRequire(r.Mod.Path, tagVersion); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, r := range append([]*modfile.Replace(nil), f.Replace...) {
		if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
			t.Fatal(err)
		}
	}
	gomod, err = f.Format()
	if err != nil {
		t.Fatal(err)
	}
	mv := module.Version{Path: f.Module.Mod.Path, Version: tagVersion}

	ls := exec.Command("git", "ls-files", "-z", "--", ".")
	ls.Dir = src
	out, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v", src, err)
	}
	var files []modzip.File
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if name == "" || nested(src, name) {
			continue
		}
		if name == "go.mod" {
			files = append(files, memFile{name: name, data: gomod})
			continue
		}
		files = append(files, diskFile{name: name, path: filepath.Join(src, name)})
	}

	at := filepath.Join(proxy, mv.Path, "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	var zip bytes.Buffer
	if err := modzip.Create(&zip, mv, files); err != nil {
		t.Fatalf("packing %s: %v", mv.Path, err)
	}
	info, _ := json.Marshal(map[string]any{"Version": tagVersion, "Time": time.Now().UTC()})
	for name, data := range map[string][]byte{
		"list":               []byte(tagVersion + "\n"),
		tagVersion + ".info": info,
		tagVersion + ".mod":  gomod,
		tagVersion + ".zip":  zip.Bytes(),
	} {
		write(t, filepath.Join(at, name), string(data))
	}
}

// forget removes the published versions from the module cache (extracted
// and downloaded), where the go command left them read-only.
func forget(t *testing.T, cache string) {
	var gone []string
	for _, top := range []string{filepath.Join(cache, "github.com", "wsmux"), filepath.Join(cache, "cache", "download", "github.com", "wsmux")} {
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if strings.Contains(d.Name(), tagVersion) {
				gone = append(gone, p)
				if d.IsDir() {
					return fs.SkipDir
				}
			}
			return nil
		})
	}
	for _, p := range gone {
		_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(q, 0o755)
			}
			return nil
		})
		if err := os.RemoveAll(p); err != nil {
			t.Errorf("cleaning the module cache: %v", err)
		}
	}
}

// nested reports whether name, a file under src, belongs to a module
// nested in src's.
func nested(src, name string) bool {
	for d := filepath.Dir(name); d != "." && d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(src, d, "go.mod")); err == nil {
			return true
		}
	}
	return false
}

type diskFile struct{ name, path string }

func (f diskFile) Path() string                 { return filepath.ToSlash(f.name) }
func (f diskFile) Lstat() (os.FileInfo, error)  { return os.Lstat(f.path) }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.path) }

type memFile struct {
	name string
	data []byte
}

func (f memFile) Path() string                 { return f.name }
func (f memFile) Lstat() (os.FileInfo, error)  { return memInfo(f), nil }
func (f memFile) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.data)), nil }

type memInfo memFile

func (i memInfo) Name() string       { return filepath.Base(i.name) }
func (i memInfo) Size() int64        { return int64(len(i.data)) }
func (i memInfo) Mode() fs.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
