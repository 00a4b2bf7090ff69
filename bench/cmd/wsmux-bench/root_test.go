package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/wsmux/wsmux/internal/testnet"
)

// asCommandEnv, set in the environment, makes the test binary run as
// wsmux-bench: the second process of `wsmux-bench idle` is this binary
// again (os.Executable), so a test of idle needs it to be the command.
const asCommandEnv = "WSMUX_BENCH_TEST_AS_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(asCommandEnv) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// invoke runs wsmux-bench with args in this process and returns its exit
// code, standard output and standard error.
func invoke(ctx context.Context, stdin io.Reader, args ...string) (int, string, string) {
	var out, errb testnet.Buffer
	if ctx == nil {
		ctx = context.Background()
	}
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	code := run(ctx, args, stdin, &out, &errb)
	return code, out.String(), errb.String()
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		args     []string
		code     int
		inStderr string
	}{
		{[]string{"--help"}, exitOK, ""},
		{[]string{"nope"}, exitUsage, "wsmux-bench: unknown command \"nope\""},
		{[]string{"idle", "--nope"}, exitUsage, "Run 'wsmux-bench --help'"},
		{[]string{"idle", "extra"}, exitUsage, "unknown command \"extra\""},
		{[]string{"--log-level", "loud", "idle"}, exitUsage, "--log-level \"loud\""},
		{[]string{"--log-format", "xml", "idle"}, exitUsage, "--log-format \"xml\""},
		{[]string{"bench", "--workloads", "Nope"}, exitUsage, "no workload \"Nope\""},
		{[]string{"bench", "--transports", "nope"}, exitUsage, "no transport \"nope\""},
		{[]string{"bench", "--out", "/dev/null/x", "--workloads", "Echo64", "--transports", "ws"}, exitError, "wsmux-bench: mkdir /dev/null"},
	}
	for _, tt := range tests {
		code, _, errOut := invoke(nil, nil, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.inStderr) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d, stderr with %q", tt.args, code, errOut, tt.code, tt.inStderr)
		}
	}
}

// The whole idle run: the server here, its clients in a second process
// that is this binary started as `wsmux-bench idle --client ADDR`, then a
// short active phase.
func TestIdleRun(t *testing.T) {
	t.Setenv(asCommandEnv, "1") // for the second process
	code, out, errOut := invoke(t.Context(), nil, "idle", "--sessions", "20", "--active", "2", "--duration", "200ms")
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut)
	}
	for _, want := range []string{"server driver=eventloop sessions=20 (clients in a second process)", "B/session", "active: 2 sessions echoing 64 B while 18 stay idle: ", " echoes in 200ms "} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
}
