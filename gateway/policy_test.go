package gateway

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/wsmux/wsmux/gateway/kubeclient"
)

const testPolicy = `
rules:
- users: [alice]
  namespaces: [a]
  pods: ["web-*"]
  subresources: [exec]
  containers: [app]
- groups: [ops]
`

func TestParsePolicy(t *testing.T) {
	if _, err := ParsePolicy([]byte(testPolicy)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		"rules:\n- namespaces: [a]\n",                   // no subject
		"rules:\n- users: [a]\n  subresource: [exec]\n", // typo
		"rules:\n- users: [a]\n  subresources: [logs]\n",
		"rules:\n- users: [a]\n  pods: [\"[\"]\n",
	} {
		if _, err := ParsePolicy([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestPolicyRefusesBeforeUpstream: the gateway's own policy refuses with
// 403 and opens nothing upstream; what it allows still meets the
// cluster's RBAC.
func TestPolicyRefusesBeforeUpstream(t *testing.T) {
	g, _ := startImpersonating(t)
	p, err := ParsePolicy([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g.g.cfg.Policy = &PolicyStore{}
	g.g.cfg.Policy.Set(p)
	exec := func(token, ns, pod, container string) error {
		var out bytes.Buffer
		return kubeclient.Exec(context.Background(), g.opts(token), kubeclient.ExecOptions{
			Namespace: ns, Pod: pod, Container: container, Command: []string{"cat"}, Stdin: strings.NewReader("x"), Stdout: &out,
		})
	}
	if err := exec("alice-token", "a", "web-0", "app"); err != nil {
		t.Fatalf("allowed by both: %v", err)
	}
	before := len(g.cl.Impersonations())
	for _, tc := range []struct{ token, ns, pod, container, why string }{
		{"alice-token", "a", "db-0", "app", `pod "db-0"`},
		{"alice-token", "a", "web-0", "sidecar", "container sidecar"},
		{"alice-token", "a", "web-0", "", "pods/exec"},
		{"alice-token", "b", "web-0", "app", `namespace "b"`},
		{"bob-token", "a", "web-0", "app", `user "bob"`},
	} {
		err := exec(tc.token, tc.ns, tc.pod, tc.container)
		if !isForbidden(err) || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "gateway's policy") {
			t.Errorf("%+v: %v, want 403 naming %s", tc, err, tc.why)
		}
	}
	if n := len(g.cl.Impersonations()); n != before {
		t.Errorf("refused requests reached the cluster: %d", n-before)
	}
	// The ops group may everything by policy, and by the cluster's RBAC.
	if err := exec("ops-token", "b", "db-0", "x"); err != nil {
		t.Errorf("ops: %v", err)
	}
}
