package modtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// root is the repository's root folder.
func root(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// consumer writes a module named example.com/consumer with main.go
// importing imports (each used with a blank identifier) and goMod's
// require and replace lines.
func consumer(t *testing.T, imports []string, goMod string) string {
	t.Helper()
	dir := t.TempDir()
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for _, p := range imports {
		src.WriteString("\t_ \"" + p + "\"\n")
	}
	src.WriteString(")\n\nfunc main() {}\n")
	write(t, filepath.Join(dir, "main.go"), src.String())
	write(t, filepath.Join(dir, "go.mod"), "module example.com/consumer\n\ngo 1.26.0\n\n"+goMod)
	return dir
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goCmd runs the go command in dir with env added, and returns its output.
func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// graph returns the consumer's `go list -m all`: module path to version.
func graph(t *testing.T, dir string, env []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(goCmd(t, dir, env, "list", "-m", "all")), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			m[f[0]] = f[1]
		} else if len(f) == 1 {
			m[f[0]] = ""
		}
	}
	return m
}

// checkout is the require and replace lines that point a consumer at this
// checkout's modules, as a user does before the modules are tagged.
func checkout(t *testing.T, modules ...string) string {
	t.Helper()
	var b strings.Builder
	for _, m := range modules {
		dir := root(t)
		if m != "" {
			dir = filepath.Join(dir, m)
		}
		path := strings.TrimSuffix("github.com/wsmux/wsmux/"+m, "/")
		b.WriteString("require " + path + " v0.0.0-00010101000000-000000000000\nreplace " + path + " => " + dir + "\n")
	}
	return b.String()
}

// TestMuxOnlyConsumer: a program that imports only mux gets gobwas/ws and
// golang.org/x in its graph, and no Kubernetes module, no test library and
// no benchmark peer.
func TestMuxOnlyConsumer(t *testing.T) {
	dir := consumer(t, []string{"github.com/wsmux/wsmux/mux"}, checkout(t, ""))
	goCmd(t, dir, nil, "mod", "tidy")
	goCmd(t, dir, nil, "build", "./...")
	for m := range graph(t, dir, nil) {
		switch {
		case m == "example.com/consumer", m == "github.com/wsmux/wsmux",
			strings.HasPrefix(m, "github.com/gobwas/"), strings.HasPrefix(m, "golang.org/x/"):
		default:
			t.Errorf("a consumer of mux has %s in its graph", m)
		}
	}
}

// TestPinnedClientGo: a program on client-go v0.30.0 that adds mux keeps
// its Kubernetes release after go mod tidy.
func TestPinnedClientGo(t *testing.T) {
	dir := consumer(t, []string{"github.com/wsmux/wsmux/mux", "k8s.io/client-go/rest"},
		checkout(t, "")+"require k8s.io/client-go v0.30.0\n")
	goCmd(t, dir, nil, "mod", "tidy")
	goCmd(t, dir, nil, "build", "./...")
	g := graph(t, dir, nil)
	for _, m := range []string{"k8s.io/client-go", "k8s.io/apimachinery", "k8s.io/api"} {
		if g[m] != "v0.30.0" {
			t.Errorf("%s is %q after go mod tidy, want v0.30.0", m, g[m])
		}
	}
}

// TestOldestKubernetesTakesAdapters: a kubelet or apiserver of the oldest
// Kubernetes minor the adapters claim (adapters/go.mod) takes them without
// an upgrade of its k8s.io modules.
func TestOldestKubernetesTakesAdapters(t *testing.T) {
	oldest := requiredVersion(t, filepath.Join(root(t), "adapters", "go.mod"), "k8s.io/client-go")
	dir := consumer(t, []string{"github.com/wsmux/wsmux/adapters/httpstream", "github.com/wsmux/wsmux/adapters/bridge", "k8s.io/client-go/rest"},
		checkout(t, "", "adapters")+"require (\n\tk8s.io/client-go "+oldest+"\n\tk8s.io/apimachinery "+oldest+"\n\tk8s.io/api "+oldest+"\n)\n")
	goCmd(t, dir, nil, "mod", "tidy")
	goCmd(t, dir, nil, "build", "./...")
	g := graph(t, dir, nil)
	for _, m := range []string{"k8s.io/client-go", "k8s.io/apimachinery", "k8s.io/api"} {
		if g[m] != oldest {
			t.Errorf("%s is %q after go mod tidy, want %s (adapters/go.mod)", m, g[m], oldest)
		}
	}
	t.Logf("the adapters' oldest Kubernetes release: %s", oldest)
}

// requiredVersion returns the version go.mod at path requires of module m.
func requiredVersion(t *testing.T, path, m string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == m {
			return f[1]
		}
		if len(f) >= 3 && f[0] == "require" && f[1] == m {
			return f[2]
		}
	}
	t.Fatalf("%s requires no %s", path, m)
	return ""
}
