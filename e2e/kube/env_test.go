package kube

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/cert"

	"github.com/wsmux/wsmux/adapters/bridge"
	"github.com/wsmux/wsmux/e2e/kube/internal/controlplane"
	"github.com/wsmux/wsmux/e2e/kube/internal/kubelet"
	"github.com/wsmux/wsmux/internal/testnet"
)

// The callers and the gateway, as the apiserver and the gateway know them.
const (
	gatewayUser  = "wsmux-gateway"
	gatewayToken = "gateway-token"
	aliceToken   = "alice-token" // caller A: exec and attach on a/web-0
	bobToken     = "bob-token"   // caller B: port-forward to a/web-0 only
	ns           = "a"
	execPod      = "web-0" // the pod alice may exec into and bob may forward to
	otherPod     = "web-1" // a pod nobody may exec into
)

// apiTokens are the apiserver's: the gateway's own, and alice's and bob's
// for the legs that go to the apiserver directly.
var apiTokens = []controlplane.Token{
	{Token: gatewayToken, User: gatewayUser, UID: "uid-gateway"},
	{Token: aliceToken, User: "alice", UID: "uid-alice", Groups: []string{"dev"}},
	{Token: bobToken, User: "bob", UID: "uid-bob"},
}

// gatewayTokens is the gateway's --token-file: the same callers.
const gatewayTokens = aliceToken + `,alice,uid-alice,"dev"` + "\n" + bobToken + ",bob,uid-bob\n"

// populate creates what a cluster would have: the Node whose kubelet is
// kl, the pods bound to it and running, and RBAC: alice may exec into
// a/web-0 and, as a member of the group dev, attach to it; bob may
// port-forward to it; both may read pods; the gateway may impersonate and
// do nothing else.
func populate(t *testing.T, api *controlplane.APIServer, kl *kubelet.Kubelet, node string) {
	t.Helper()
	ctx := context.Background()
	c := api.Admin
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	n, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	must("node", err)
	n.Status = corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: kl.Port()}},
		// the stand-in translates WebSockets as the kubelet does.
		DeclaredFeatures: []string{"ExtendWebSocketsToKubelet"},
		Conditions:       []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}
	_, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	must("node status", err)
	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		must("namespace", err)
	}
	for _, name := range []string{execPod, otherPod} {
		p, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
				Name: "app", Image: "standin", Stdin: true,
				Ports: []corev1.ContainerPort{{ContainerPort: kubelet.EchoPort}, {ContainerPort: 9090}},
			}}},
		}, metav1.CreateOptions{})
		must("pod "+name, err)
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "127.0.0.1", PodIP: "127.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "standin", Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}}
		_, err = c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		must("pod status "+name, err)
	}
	read := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}
	on := func(sub string) rbacv1.PolicyRule {
		// get and create: a WebSocket upgrade is a GET, and the apiserver
		// also asks for create (AuthorizePodWebsocketUpgradeCreatePermission).
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/" + sub},
			ResourceNames: []string{execPod}, Verbs: []string{"get", "create"}}
	}
	// attach is the group dev's (alice's, in the gateway's token file and
	// the apiserver's): only a forwarded Impersonate-Group grants it.
	for _, b := range []struct {
		name  string
		kind  string
		rules []rbacv1.PolicyRule
	}{
		{"alice", rbacv1.UserKind, []rbacv1.PolicyRule{read, on("exec")}},
		{"dev", rbacv1.GroupKind, []rbacv1.PolicyRule{on("attach")}},
		{"bob", rbacv1.UserKind, []rbacv1.PolicyRule{read, on("portforward")}},
	} {
		_, err := c.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: b.name}, Rules: b.rules}, metav1.CreateOptions{})
		must("role "+b.name, err)
		_, err = c.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: b.name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: b.kind, Name: b.name}}}, metav1.CreateOptions{})
		must("rolebinding "+b.name, err)
	}
	// The gateway may impersonate its callers (users, their uids and
	// groups) and nothing else: without impersonation it can do nothing.
	_, err = c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "wsmux-gateway"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"users", "groups"}, Verbs: []string{"impersonate"}},
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"uids"}, Verbs: []string{"impersonate"}},
		}}, metav1.CreateOptions{})
	must("clusterrole", err)
	_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "wsmux-gateway"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "wsmux-gateway"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: gatewayUser}}}, metav1.CreateOptions{})
	must("clusterrolebinding", err)
}

// gatewayProc is a running `wsmux gateway`.
type gatewayProc struct {
	URL   string
	CAPEM []byte
	log   *testnet.Buffer
}

var serving = regexp.MustCompile(`gateway: serving.* listen=(\S+)`)

// startGateway runs the wsmux binary's gateway (TLS, impersonating, the
// callers of gatewayTokens) in front of cluster (the apiserver, or the
// wsmux hop in front of it), speaking upstream to it; it stops at t's
// cleanup. It is ready when it logs the address it listens on.
func startGateway(t *testing.T, cluster string, clusterCA []byte, upstream string, extra ...string) *gatewayProc {
	t.Helper()
	dir := t.TempDir()
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "tokens": []byte(gatewayTokens),
		"kubeconfig": []byte(kubeconfig(cluster, clusterCA, gatewayToken))}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string{"gateway", "--listen", "127.0.0.1:0", "--tls-cert", filepath.Join(dir, "tls.crt"),
		"--tls-key", filepath.Join(dir, "tls.key"), "--token-file", filepath.Join(dir, "tokens"),
		"--kubeconfig", filepath.Join(dir, "kubeconfig"), "--upstream", upstream}, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, wsmuxBin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 15 * time.Second
	g := &gatewayProc{CAPEM: certPEM, log: &testnet.Buffer{}}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("gateway log:\n%s", g.log.String())
		}
	})
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(g.log, line)
		if m := serving.FindStringSubmatch(line); m != nil {
			g.URL = "https://" + m[1]
			break
		}
	}
	if g.URL == "" {
		t.Fatalf("wsmux gateway exited before serving:\n%s", g.log.String())
	}
	go func() {
		for sc.Scan() {
			fmt.Fprintln(g.log, sc.Text())
		}
	}()
	return g
}

func kubeconfig(server string, ca []byte, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, server, b64(ca), token)
}

// startWsmuxHop serves wsmux in front of the apiserver, for the gateway's
// --upstream wsmux: the real apiserver speaks SPDY and WebSocket, not wsmux,
// so a cluster-side hop (adapters/bridge's wsmux-to-SPDY translator) takes
// the gateway's wsmux upgrades, with their Authorization and Impersonate-*
// headers, to the apiserver over SPDY; every other request (the pod GETs,
// discovery) is reverse-proxied to it as is.
func startWsmuxHop(t *testing.T, api *controlplane.APIServer) *httptest.Server {
	t.Helper()
	u, _ := url.Parse(api.URL)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(api.CAPEM)
	tlsCfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	upgrades := bridge.NewWsmuxToSPDY(u, tlsCfg)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{TLSClientConfig: tlsCfg}
	hop := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			upgrades.ServeHTTP(w, r)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	hop.StartTLS()
	t.Cleanup(hop.Close)
	return hop
}
