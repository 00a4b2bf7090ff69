package testnet

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Program returns the path of the program name that a test runs (on PATH,
// or in /usr/bin or /usr/sbin, which a non-root PATH may lack). Without
// it the test is skipped, saying why and how to install it, or fails when
// CI is set: .ci/run installs every such program.
func Program(t testing.TB, name, why string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/bin", "/usr/sbin"} {
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p
		}
	}
	msg := name + " is not on PATH: " + why
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatal("CI is set, so " + name + " must be installed: " + msg)
	}
	t.Skip(msg)
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
