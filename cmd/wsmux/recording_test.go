package main

import (
	"context"
	"strings"
	"testing"
)

// TestRecordingFlags: the recording flags' usage errors name the flag and
// what to do.
func TestRecordingFlags(t *testing.T) {
	tok := writeFile(t, "token", "secret\n")
	kc := writeFile(t, "kubeconfig", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)
	badPolicy := writeFile(t, "policy", "sessions:\n- subresources: [logs]\n")
	base := []string{"gateway", "--listen", "127.0.0.1:0", "--token-file", tok, "--impersonate=false", "--kubeconfig", kc}
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"required without a sink", []string{"--recording-required"}, []string{"--recording-required", "--recording-dir or --recording-url"}},
		{"both sinks", []string{"--recording-dir", dir, "--recording-url", "http://127.0.0.1:1/"}, []string{"pick one"}},
		{"missing dir", []string{"--recording-dir", dir + "/nope"}, []string{"--recording-dir", "create it"}},
		{"bad url", []string{"--recording-url", "ftp://x"}, []string{"--recording-url", "http or https"}},
		{"bad rate", []string{"--recording-dir", dir, "--recording-rate", "fast"}, []string{"--recording-rate"}},
		{"bad policy", []string{"--recording-dir", dir, "--recording-policy", badPolicy}, []string{"--recording-policy", `subresource "logs"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := invoke(context.Background(), nil, append(append([]string(nil), base...), tc.args...)...)
			all := out + errOut
			if code != exitUsage {
				t.Errorf("exit %d, want %d:\n%s", code, exitUsage, all)
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q:\n%s", w, all)
				}
			}
		})
	}
}
