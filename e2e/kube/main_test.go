package kube

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// wsmuxBin is the wsmux binary built from cmd/wsmux by TestMain.
var wsmuxBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wsmux-e2e-kube")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	wsmuxBin = filepath.Join(dir, "wsmux")
	build := exec.Command("go", "build", "-o", wsmuxBin, ".")
	build.Dir = filepath.Join("..", "..", "cmd", "wsmux")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building wsmux (cmd/wsmux): %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// kubectlPath is the kubectl in PATH. Without one the test is skipped,
// unless CI is set: CI must run these tests, so there a missing kubectl
// fails them.
func kubectlPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kubectl")
	if err == nil {
		return p
	}
	msg := "kubectl not found in PATH: install kubectl (1.31 or later; Debian's package kubectl) to run the real control plane tests"
	if os.Getenv("CI") != "" {
		t.Fatal(msg + " (CI is set: the tests must run)")
	}
	t.Skip(msg)
	return ""
}

// moduleVersion is the version of module path in this module's build list
// (go list -m: this test binary's build info names no dependencies).
func moduleVersion(path string) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", path).Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
