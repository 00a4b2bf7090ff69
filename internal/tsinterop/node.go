package tsinterop

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// ClientDir is clients/ts of this checkout.
func ClientDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "clients", "ts")
}

// NeedCompiled returns node's path and the path of the compiled script
// clients/ts/dist/test/tools/NAME.js, built by `npm test` (make test runs it
// first). Without them the test is skipped, except under CI, where it fails.
func NeedCompiled(t testing.TB, name string) (node, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	script = filepath.Join(ClientDir(), "dist", "test", "tools", name+".js")
	if err == nil {
		_, err = os.Stat(script)
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v: CI must run `npm ci && npm test` in clients/ts before the Go tests (make test does)", err)
		}
		t.Skipf("%v: run `make ts-test` (npm ci && npm test in clients/ts) first", err)
	}
	return node, script
}
