package main

import (
	"strings"
	"testing"
)

// TestFleetFlagsUsage: the fleet's flags are checked before anything is
// opened, each mistake a usage error (exit 2) naming the flag and what to
// pass instead.
func TestFleetFlagsUsage(t *testing.T) {
	tok := writeFile(t, "token", "x,alice\n")
	short := writeFile(t, "short.secret", "too short\n")
	good := writeFile(t, "fleet.secret", strings.Repeat("k", 32)+"\n")
	base := []string{"gateway", "--listen", "127.0.0.1:0", "--token-file", tok}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--fleet-listen", "127.0.0.1:0"}, "--fleet-listen needs --shared-state"},
		{[]string{"--replica-name", "gw-0"}, "--replica-name needs --shared-state"},
		{[]string{"--shared-state", "http://redis:6379"}, "want redis://"},
		{[]string{"--shared-state", "redis://:hunter2@"}, "want redis://"},
		{[]string{"--shared-state", "redis://r:6379", "--shared-state-timeout", "0s"}, "--shared-state-timeout"},
		{[]string{"--shared-state", "redis://r:6379"}, "needs --fleet-listen and --fleet-secret-file"},
		{[]string{"--shared-state", "redis://r:6379", "--fleet-listen", "127.0.0.1:0", "--fleet-secret-file", short}, "want at least 32"},
		{[]string{"--shared-state", "redis://r:6379", "--fleet-listen", ":8444", "--fleet-secret-file", good}, "--advertise-address"},
		{[]string{"--shared-state", "redis://r:6379", "--fleet-listen", "127.0.0.1:0", "--fleet-secret-file", good, "--advertise-address", "nohost"}, "--advertise-address"},
	} {
		code, _, errOut := invoke(nil, nil, append(append([]string(nil), base...), tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d saying %q", tc.args, code, errOut, exitUsage, tc.want)
		}
		if strings.Contains(errOut, "hunter2") {
			t.Errorf("%q: the error shows the password: %q", tc.args, errOut)
		}
	}
	// Without resumption, no fleet listener is needed.
	code, _, errOut := invoke(nil, nil, append(base, "--shared-state", "redis://r:6379", "--resume-timeout", "0", "--kubeconfig", writeFile(t, "kc", "bad"))...)
	if strings.Contains(errOut, "--fleet-listen") {
		t.Errorf("--resume-timeout 0: exit %d, stderr %q; want no fleet listener asked for", code, errOut)
	}
}
