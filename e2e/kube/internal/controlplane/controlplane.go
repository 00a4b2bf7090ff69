// Package controlplane starts a real Kubernetes control plane in the test's
// process, as Kubernetes' own integration tests do: an embedded etcd
// (go.etcd.io/etcd/server/v3/embed) and the kube-apiserver of
// k8s.io/kubernetes (cmd/kube-apiserver/app/testing.StartTestServer), with
// RBAC authorization and static bearer tokens. Tests only.
package controlplane

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	etcdversion "go.etcd.io/etcd/api/v3/version"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubeversion "k8s.io/component-base/version"
	apitesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// Etcd is a running embedded etcd.
type Etcd struct {
	URL     string // its client URL (plain HTTP on the loopback)
	Version string // the etcd server's version
	e       *embed.Etcd
}

// StartEtcd starts etcd in a temporary folder; it stops at t's cleanup.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.UnsafeNoFsync = true // a test's data: the disk's flushes only slow it
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	// embed takes URLs, not listeners: the ports are picked free, then
	// bound by etcd (a race with another process is possible, and then
	// StartEtcd fails rather than hangs).
	client, peer := freeURL(t), freeURL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("etcd not ready after a minute")
	}
	return &Etcd{URL: client.String(), Version: etcdversion.Version, e: e}
}

func freeURL(t testing.TB) url.URL {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return url.URL{Scheme: "http", Host: ln.Addr().String()}
}

// Token is one line of the apiserver's --token-auth-file.
type Token struct {
	Token, User, UID string
	Groups           []string
}

// Options configure an APIServer.
type Options struct {
	// Prefix is the apiserver's etcd key prefix: several apiservers, one
	// after the other, can share an etcd.
	Prefix string
	// Tokens are the bearer tokens it accepts.
	Tokens []Token
	// FeatureGates is its --feature-gates ("" for the release's defaults).
	FeatureGates string
}

// APIServer is a running kube-apiserver.
type APIServer struct {
	// Admin is a loopback client with every right (system:masters).
	Admin *kubernetes.Clientset
	// URL is its secure address, https://127.0.0.1:PORT.
	URL string
	// CAPEM verifies its serving certificate.
	CAPEM []byte
	// Version is the apiserver's gitVersion (k8s.io/component-base/version,
	// as built; /version may say the same).
	Version string
}

// StartAPIServer starts a kube-apiserver on etcd with RBAC authorization
// and o.Tokens; it stops at t's cleanup.
func StartAPIServer(t testing.TB, etcd *Etcd, o Options) *APIServer {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "tokens.csv")
	var b strings.Builder
	for _, tk := range o.Tokens {
		fmt.Fprintf(&b, "%s,%s,%s,%q\n", tk.Token, tk.User, tk.UID, strings.Join(tk.Groups, ","))
	}
	if err := os.WriteFile(tokenFile, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{
		"--authorization-mode=RBAC",
		"--token-auth-file=" + tokenFile,
		// the admission plugins that need controllers this process does
		// not run (service accounts' tokens, namespaces' lifecycle) are off.
		"--disable-admission-plugins=ServiceAccount,NamespaceLifecycle",
	}
	if o.FeatureGates != "" {
		flags = append(flags, "--feature-gates="+o.FeatureGates)
	}
	storage := storagebackend.NewDefaultConfig(o.Prefix, nil)
	storage.Transport.ServerList = []string{etcd.URL}
	opts := apitesting.NewDefaultTestServerOptions()
	srv, err := apitesting.StartTestServer(t, opts, flags, storage)
	if err != nil {
		t.Fatalf("kube-apiserver: %v", err)
	}
	t.Cleanup(srv.TearDownFn)
	admin, err := kubernetes.NewForConfig(srv.ClientConfig)
	if err != nil {
		t.Fatal(err)
	}
	sc := srv.ServerOpts.SecureServing
	ca, err := os.ReadFile(filepath.Join(sc.ServerCert.CertDirectory, sc.ServerCert.PairName+".crt"))
	if err != nil {
		t.Fatalf("the apiserver's serving certificate: %v", err)
	}
	a := &APIServer{Admin: admin, URL: "https://127.0.0.1:" + strconv.Itoa(sc.BindPort), CAPEM: ca,
		Version: kubeversion.Get().GitVersion}
	if v, err := admin.Discovery().ServerVersion(); err == nil {
		a.Version = v.GitVersion
	}
	return a
}

// Config is a client of the apiserver with token as its credentials.
func (a *APIServer) Config(token string) *rest.Config {
	return &rest.Config{Host: a.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: a.CAPEM}}
}
