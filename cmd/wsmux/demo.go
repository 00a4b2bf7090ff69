package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/gateway/webui"
)

const demoUser = "demo"

func newDemoCmd(a *app) *cobra.Command {
	var listen, dir, kubeconfig string
	var exposeShell bool
	c := &cobra.Command{
		Use:   "demo [--listen 127.0.0.1:PORT] [--kubeconfig FILE]",
		Short: "Start a demo cluster behind a wsmux gateway, to try kubectl through it",
		Long: `Start, in this process and on loopback, a small stand-in Kubernetes cluster
(an apiserver answering discovery and pod GETs with a tiny RBAC, and the
kubelet's real streaming handlers from k8s.io/cri-streaming) and a wsmux
gateway in front of it, then write a kubeconfig that reaches the gateway as
the user "demo" and print commands to paste.

Namespace "default" has the pods "shell" (exec runs the command given as a
local process of yours, in a scratch directory, on a pseudo-terminal with -t:
a demo, not a sandbox) and
"web" (port 80 serves a small HTTP page; other ports echo). The user "demo"
may use namespace "default" only: anything else is refused by the cluster's
RBAC (403), through the gateway's impersonation.

Because exec runs local processes, the gateway listens on loopback only,
unless --expose-local-shell-to-network says otherwise. Ctrl-C stops it.`,
		Example: `  wsmux demo
  wsmux demo --listen 127.0.0.1:8443 --kubeconfig /tmp/demo.kubeconfig`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(a, listen, dir, kubeconfig, exposeShell)
		},
	}
	fl := c.Flags()
	fl.StringVar(&listen, "listen", "127.0.0.1:0", "where the gateway listens (HOST:PORT; port 0: any free port)")
	fl.StringVar(&dir, "dir", "", "directory for the demo's files (CA, token, kubeconfig) and the shell's scratch directory (default: a new temporary directory, removed on exit)")
	fl.StringVar(&kubeconfig, "kubeconfig", "", "where to write the kubeconfig (default: DIR/kubeconfig); an existing file is replaced only if it is a wsmux demo kubeconfig")
	fl.BoolVar(&exposeShell, "expose-local-shell-to-network", false, "allow --listen on a non-loopback address: anyone who can reach it and has the printed token runs commands as you on this machine")
	return c
}

func runDemo(a *app, listen, dir, kubeconfig string, exposeShell bool) error {
	if err := checkListen("--listen", listen); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && !exposeShell {
		return usageErrorf("--listen %s is not a loopback address: the demo's pod \"shell\" runs commands as you on this machine; use 127.0.0.1, or pass --expose-local-shell-to-network if that is what you want", listen)
	}
	if kubeconfig != "" {
		if b, err := os.ReadFile(kubeconfig); err == nil && !strings.Contains(string(b), "wsmux-demo") {
			return usageErrorf("--kubeconfig %s exists and is not a wsmux demo kubeconfig: pick another file (the demo will not overwrite it)", kubeconfig)
		}
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "wsmux-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return usageErrorf("--dir %s: %v", dir, err)
	}
	if kubeconfig == "" {
		kubeconfig = filepath.Join(dir, "kubeconfig")
	}
	shellDir := filepath.Join(dir, "shell")
	if err := os.MkdirAll(shellDir, 0o700); err != nil {
		return err
	}

	// The pod "web": a small HTTP server on loopback.
	webLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	webGate, err := ops.NewConnGate("demo-web", ops.DefaultMaxConns, nil, nil, a.log)
	if err != nil {
		return err
	}
	webLimited, webHook := ops.LimitListener(webLn, webGate)
	web := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "Hello from pod web in the wsmux demo: %s %s\n", r.Method, r.URL.Path)
	}), ConnState: webHook}
	ops.ConnLimits{}.Apply(web)
	go func() { _ = web.Serve(webLimited) }()
	defer web.Close()

	cl, err := clustertest.New(clustertest.Options{Dir: shellDir, PTY: true, Forward: func(pod string, port int32) string {
		if pod == "web" && port == 80 {
			return webLn.Addr().String()
		}
		return ""
	}})
	if err != nil {
		return err
	}
	defer cl.Close()
	cl.SetRBAC(map[string][]string{demoUser: {"default"}})

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w: pick another address or stop what uses it", listen, err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	serverHost := host
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() || host == "" {
		serverHost = "127.0.0.1"
	}
	cert, caPEM, err := demoCert(serverHost)
	if err != nil {
		return err
	}
	tokenBytes := make([]byte, 16)
	rand.Read(tokenBytes)
	token := hex.EncodeToString(tokenBytes)
	server := "https://" + net.JoinHostPort(serverHost, port)
	caFile, tokenFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, []byte(demoKubeconfig(server, caPEM, token)), 0o600); err != nil {
		return usageErrorf("--kubeconfig %s: %v", kubeconfig, err)
	}

	g, err := gateway.New(gateway.Config{
		Auth:        auth.NewWithUsers([]auth.Token{{Token: token, User: controller.User{Name: demoUser, Groups: []string{"demo-users"}}}}, nil),
		Impersonate: true, Cluster: cl.RestConfig(), Logger: a.log, DrainTimeout: drainBound(5 * time.Second),
		ResumeTimeout: 30 * time.Second,
	})
	if err != nil {
		return err
	}
	ctx, cancel := a.signalContext()
	defer cancel()
	self, _ := os.Executable()
	if self == "" {
		self = "wsmux"
	}
	fmt.Fprintf(a.stdout, `wsmux demo: a stand-in cluster behind a wsmux gateway at %s, as user %q.
Namespace "default" has the pods "shell" (exec runs local processes in %s) and "web" (HTTP on port 80).

Try, in another terminal:

  export KUBECONFIG=%s
  kubectl exec -it shell -- sh
  kubectl port-forward pod/web 8080:80      # then: curl http://127.0.0.1:8080/
  %s exec --server %s --ca-file %s --token-file %s shell -- uname -a

or open the web terminal at %s%s (self-signed certificate: %s) with the token in %s.

Ctrl-C stops the demo.
`, server, demoUser, shellDir, kubeconfig, self, server, caFile, tokenFile, server, webui.Prefix, caFile, tokenFile)
	a.log.Info("demo: serving", "gateway", server, "cluster", cl.Server.URL, "kubeconfig", kubeconfig)
	return ops.Serve(ctx, ln, webui.Wrap(g.Handler()), ops.ServerOptions{
		Certificate: cert, ShutdownTimeout: 5 * time.Second, Abort: a.aborted(), Logger: a.log, Metrics: g.Metrics(),
	}, g.Metrics().Sessions, g.Health())
}

// demoCert is a self-signed certificate for host (and localhost,
// 127.0.0.1, ::1) that is also its own CA.
func demoCert(host string) (*tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "wsmux demo gateway"},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:        true, BasicConstraintsValid: true,
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	} else if host != "" && host != "localhost" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func demoKubeconfig(server string, caPEM []byte, token string) string {
	return fmt.Sprintf(`# written by "wsmux demo"; valid while it runs
apiVersion: v1
kind: Config
clusters:
- name: wsmux-demo
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: wsmux-demo-user
  user:
    token: %s
contexts:
- name: wsmux-demo
  context: {cluster: wsmux-demo, user: wsmux-demo-user, namespace: default}
current-context: wsmux-demo
`, server, base64.StdEncoding.EncodeToString(caPEM), token)
}
