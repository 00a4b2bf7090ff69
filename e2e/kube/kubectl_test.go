package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/e2e/kube/internal/controlplane"
	"github.com/wsmux/wsmux/e2e/kube/internal/kubelet"
	"github.com/wsmux/wsmux/internal/testnet"
)

// TestRealControlPlane runs unmodified kubectl through `wsmux gateway` to a
// real kube-apiserver (RBAC, impersonation, the pod subresources'
// authorization and proxying all its own) on an embedded etcd, with the
// apiserver's ExtendWebSocketsToKubelet on and off, and the gateway
// speaking SPDY upstream (to the apiserver) or wsmux (to a wsmux hop in
// front of it).
func TestRealControlPlane(t *testing.T) {
	kubectl := kubectlPath(t)
	kv, err := exec.Command(kubectl, "version", "--client").Output()
	if err != nil {
		t.Fatalf("%s version --client: %v", kubectl, err)
	}
	fmt.Printf("e2e-kube: %s: %s\n", kubectl, strings.Join(strings.Fields(string(kv)), " "))
	start := time.Now()
	etcd := controlplane.StartEtcd(t)
	fmt.Printf("e2e-kube: etcd %s (go.etcd.io/etcd/server/v3 %s) ready in %.1f s; kube-apiserver of k8s.io/kubernetes %s\n",
		etcd.Version, moduleVersion("go.etcd.io/etcd/server/v3"), time.Since(start).Seconds(), moduleVersion("k8s.io/kubernetes"))
	first := true
	for _, gate := range []bool{true, false} {
		t.Run("ExtendWebSocketsToKubelet="+strconv.FormatBool(gate), func(t *testing.T) {
			start := time.Now()
			api := controlplane.StartAPIServer(t, etcd, controlplane.Options{
				Prefix:       fmt.Sprintf("/gate-%v", gate),
				Tokens:       apiTokens,
				FeatureGates: "ExtendWebSocketsToKubelet=" + strconv.FormatBool(gate),
			})
			fmt.Printf("e2e-kube: kube-apiserver /version %s, ExtendWebSocketsToKubelet=%v, ready in %.1f s\n",
				api.Version, gate, time.Since(start).Seconds())
			kl := kubelet.Start(t)
			populate(t, api, kl, "node-1")
			direct := testnet.NewKubectl(t, api.URL, api.CAPEM)
			t.Run("direct", func(t *testing.T) {
				testDirect(t, direct, kl, gate)
				t.Run("port-forward", func(t *testing.T) { testPortForward(t, direct, kl) })
			})
			for _, up := range []string{"spdy", "wsmux"} {
				t.Run("upstream="+up, func(t *testing.T) {
					cluster, ca := api.URL, api.CAPEM
					if up == "wsmux" {
						hop := startWsmuxHop(t, api)
						cluster, ca = hop.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hop.Certificate().Raw})
					}
					g := startGateway(t, cluster, ca, up)
					k := testnet.NewKubectl(t, g.URL, g.CAPEM)
					before := len(kl.Requests())
					testMatrix(t, k, direct, kl, cpSize(first))
					first = false
					// Whatever the gate, the gateway's upstream leg is SPDY
					// (or wsmux, which the hop turns into SPDY): the kubelet
					// sees SPDY, and no caller's identity.
					for _, r := range kl.Requests()[before:] {
						if r.Upgrade != "SPDY/3.1" || r.User != "" {
							t.Errorf("kubelet saw %+v through the gateway, want SPDY/3.1 and no Impersonate-User", r)
						}
					}
				})
			}
		})
	}
}

// cpSize is the size of the kubectl cp test's file: WSMUX_KUBE_CP_MIB
// (default 1024) for the first leg, 16 MiB for the others, which cross the
// same code; WSMUX_KUBE_CP_MIB_ALL sets every leg's.
func cpSize(first bool) int {
	mib := 16
	if first {
		mib = envInt("WSMUX_KUBE_CP_MIB", 1024)
	}
	return envInt("WSMUX_KUBE_CP_MIB_ALL", mib) << 20
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// testMatrix is what every leg checks through the gateway.
func testMatrix(t *testing.T, k, direct *testnet.Kubectl, kl *kubelet.Kubelet, cpBytes int) {
	t.Run("exec", func(t *testing.T) {
		out, errOut, code := k.Run(t, aliceToken, nil, strings.NewReader("hello kubectl"), "exec", "-i", "-n", ns, execPod, "--", "cat")
		if code != 0 || out != "hello kubectl" {
			t.Fatalf("exec -i cat: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		out, errOut, code = k.Run(t, aliceToken, nil, nil, "exec", "-n", ns, execPod, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
		if code != 3 || out != "out\n" || !strings.Contains(errOut, "err\n") {
			t.Fatalf("exec sh: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
	t.Run("attach", func(t *testing.T) {
		out, errOut, code := k.Run(t, aliceToken, nil, strings.NewReader("attached\n"), "attach", "-i", "-n", ns, execPod)
		if code != 0 || out != "attached\n" {
			t.Fatalf("attach: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
	t.Run("cp", func(t *testing.T) { testCp(t, k, kl, cpBytes) })
	t.Run("port-forward", func(t *testing.T) { testPortForward(t, k, kl) })
	t.Run("refusals", func(t *testing.T) { testRefusals(t, k, direct, kl) })
}

// testCp copies a file of size random bytes into the pod and back with
// kubectl cp and compares sha256s; the rates go to the test's output.
func testCp(t *testing.T, k *testnet.Kubectl, kl *kubelet.Kubelet, size int) {
	local := filepath.Join(k.Home, "up.bin")
	want := writeRandom(t, local, size)
	name := fmt.Sprintf("cp-%d.bin", time.Now().UnixNano())
	remote := filepath.Join(kl.PodDir(ns, execPod), name)
	defer os.Remove(remote)
	run := func(args ...string) time.Duration {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		_, errOut, code := testnet.RunCmd(t, k.Cmd(ctx, aliceToken, nil, args...), nil)
		if code != 0 {
			t.Fatalf("kubectl %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
		}
		return time.Since(start)
	}
	// kubectl cp runs tar in the pod's working directory: a relative path.
	up := run("cp", local, ns+"/"+execPod+":"+name)
	if got := sumFile(t, remote); got != want {
		t.Fatalf("cp up: the pod's copy has sha256 %s, want %s", got, want)
	}
	back := filepath.Join(k.Home, "back.bin")
	down := run("cp", ns+"/"+execPod+":"+name, back)
	if got := sumFile(t, back); got != want {
		t.Fatalf("cp down: sha256 %s, want %s", got, want)
	}
	os.Remove(local)
	os.Remove(back)
	rate := func(d time.Duration) float64 { return float64(size) / 1e6 / d.Seconds() }
	fmt.Printf("e2e-kube: %s: kubectl cp %d MiB up %.1f s (%.0f MB/s), down %.1f s (%.0f MB/s)\n",
		t.Name(), size>>20, up.Seconds(), rate(up), down.Seconds(), rate(down))
}

func writeRandom(t *testing.T, path string, size int) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	// a fast deterministic stream (the sums are what is checked), not
	// crypto/rand: 1 GiB of it would take seconds of CPU.
	var x uint64 = 0x9e3779b97f4a7c15
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= len(buf) {
		for i := 0; i < len(buf); i += 8 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			for j := 0; j < 8; j++ {
				buf[i+j] = byte(x >> (8 * j))
			}
		}
		n := min(left, len(buf))
		h.Write(buf[:n])
		if _, err := f.Write(buf[:n]); err != nil {
			t.Fatal(err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sumFile(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// testRefusals: what RBAC refuses, kubectl prints as the apiserver's 403:
// through the gateway (k) kubectl exits 1 with the apiserver's own
// sentence for it, as it does straight to the apiserver (direct) with the
// same caller's token. A caller's own impersonation (kubectl --as,
// --as-group) is dropped by the gateway: the apiserver refuses the caller
// as itself (straight to the apiserver, the caller may not impersonate at
// all, so there is no direct control for those).
func testRefusals(t *testing.T, k, direct *testnet.Kubectl, kl *kubelet.Kubelet) {
	before := len(kl.Requests())
	forbidden := func(user, resource, pod string) string {
		return fmt.Sprintf(`pods %q is forbidden: User %q cannot create resource %q in API group "" in the namespace %q`, pod, user, resource, ns)
	}
	for _, c := range []struct {
		name    string
		token   string
		args    []string
		want    string
		control bool // compare with kubectl straight to the apiserver
	}{
		{"bob exec", bobToken, []string{"exec", "-n", ns, execPod, "--", "true"}, forbidden("bob", "pods/exec", execPod), true},
		{"alice exec on another pod", aliceToken, []string{"exec", "-n", ns, otherPod, "--", "true"}, forbidden("alice", "pods/exec", otherPod), true},
		{"alice attach to another pod", aliceToken, []string{"attach", "-n", ns, otherPod}, forbidden("alice", "pods/attach", otherPod), true},
		{"alice port-forward", aliceToken, []string{"port-forward", "-n", ns, "pod/" + execPod, ":8080"}, forbidden("alice", "pods/portforward", execPod), true},
		// bob claims system:masters: with the header forwarded, he could
		// read the secrets.
		{"bob as system:masters", bobToken, []string{"--as", "bob", "--as-group", "system:masters", "get", "secrets", "-n", ns},
			`Error from server (Forbidden): secrets is forbidden: User "bob" cannot list resource "secrets" in API group "" in the namespace "a"`, false},
		// bob claims to be alice, who may exec.
		{"bob as alice exec", bobToken, []string{"--as", "alice", "exec", "-n", ns, execPod, "--", "true"}, forbidden("bob", "pods/exec", execPod), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, code := k.Run(t, c.token, nil, nil, c.args...)
			if code != 1 || !strings.Contains(errOut, c.want) {
				t.Errorf("through the gateway: exit %d, stderr %q; want exit 1 and %q", code, errOut, c.want)
			}
			if !c.control {
				return
			}
			_, directErr, directCode := direct.Run(t, c.token, nil, nil, c.args...)
			if directCode != 1 || !strings.Contains(directErr, c.want) {
				t.Errorf("straight to the apiserver: exit %d, stderr %q; want exit 1 and %q", directCode, directErr, c.want)
			}
			// The same line, "Error from server (Forbidden): ...", both ways:
			// the gateway refuses a translated WebSocket before upgrading
			// (gateway/preflight.go), as the apiserver does.
			if got, want := strings.TrimSpace(errOut), strings.TrimSpace(directErr); got != want {
				t.Errorf("kubectl printed through the gateway:\n\t%s\nand straight to the apiserver:\n\t%s", got, want)
			}
		})
	}
	if after := kl.Requests(); len(after) != before {
		t.Errorf("the kubelet was reached by refused requests: %+v", after[before:])
	}
}

// testDirect runs kubectl straight to the apiserver (no gateway): the
// control that shows what the gate changes between the apiserver and the
// kubelet. With it on (and the Node declaring the feature), the apiserver
// passes kubectl's WebSockets to the kubelet; off, it translates them to
// SPDY itself.
func testDirect(t *testing.T, k *testnet.Kubectl, kl *kubelet.Kubelet, gate bool) {
	before := len(kl.Requests())
	out, errOut, code := k.Run(t, aliceToken, nil, strings.NewReader("direct"), "exec", "-i", "-n", ns, execPod, "--", "cat")
	if code != 0 || out != "direct" {
		t.Fatalf("exec -i cat: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrs, stop := testnet.PortForward(t, k.Cmd(ctx, bobToken, nil, "port-forward", "-n", ns, "pod/"+execPod, ":8080"), cancel, 1)
	if err := testnet.EchoThrough(addrs[0], 1<<20); err != nil {
		t.Error(err)
	}
	stop()
	want := "SPDY/3.1"
	if gate {
		want = "websocket"
	}
	reqs := kl.Requests()[before:]
	if len(reqs) != 2 {
		t.Fatalf("kubelet saw %+v, want an exec and a port-forward", reqs)
	}
	for _, r := range reqs {
		if !strings.EqualFold(r.Upgrade, want) {
			t.Errorf("kubelet saw %s %s with Upgrade %q (protocols %v), want %q", r.Method, r.Path, r.Upgrade, r.Protocols, want)
		}
	}
}
