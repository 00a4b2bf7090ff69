package gateway

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	clientspdy "k8s.io/client-go/transport/spdy"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/kubeclient"
	"github.com/wsmux/wsmux/internal/testnet"
)

const tokenFile = `# token,user,uid,"groups"
alice-token,alice,u-1,"dev,qa"
bob-token,bob
ops-token,olga,,ops
anon-token
`

// startImpersonating runs a gateway that impersonates its callers (tokens
// from tokenFile, reloadable through the returned reloader) in front of a
// cluster whose RBAC lets alice into namespace a, the ops group everywhere
// and nobody else anywhere.
func startImpersonating(t testing.TB) (*gw, *auth.TokenFileReloader) {
	t.Helper()
	cl := clustertest.Start(t)
	cl.SetRBAC(map[string][]string{"alice": {"a"}, "group:ops": {"*"}})
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(tokenFile), 0o600); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil))
	a := auth.NewWithUsers(nil, nil)
	rl := &auth.TokenFileReloader{Path: path, Auth: a, Log: log}
	if err := rl.Reload(); err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{Auth: a, Impersonate: true, Cluster: cl.RestConfig(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveGateway(t, g)
	return &gw{g: g, srv: srv, cl: cl}, rl
}

func execIn(t testing.TB, g *gw, token, ns string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := kubeclient.Exec(ctx, g.opts(token), kubeclient.ExecOptions{
		Namespace: ns, Pod: "web-0", Command: []string{"cat"}, Stdin: strings.NewReader("hi " + ns), Stdout: &out,
	})
	return out.String(), err
}

func isForbidden(err error) bool {
	var ae *kubeclient.AuthError
	return err != nil && (errors.As(err, &ae) && ae.StatusCode == http.StatusForbidden || strings.Contains(err.Error(), "403"))
}

// TestPerCallerAuthorization: the same pod, alice allowed, bob refused with
// 403 by the cluster's RBAC, because the gateway acts as each of them.
func TestPerCallerAuthorization(t *testing.T) {
	g, _ := startImpersonating(t)
	if out, err := execIn(t, g, "alice-token", "a"); err != nil || out != "hi a" {
		t.Fatalf("alice in a: %q, %v", out, err)
	}
	if _, err := execIn(t, g, "bob-token", "a"); !isForbidden(err) || !strings.Contains(err.Error(), `User "bob" cannot`) {
		t.Fatalf("bob in a: %v, want 403 saying bob may not", err)
	}
	if _, err := execIn(t, g, "alice-token", "b"); !isForbidden(err) {
		t.Fatalf("alice in b: %v, want 403", err)
	}
	if out, err := execIn(t, g, "ops-token", "b"); err != nil || out != "hi b" {
		t.Fatalf("ops group in b: %q, %v", out, err)
	}
	// A token without a user is refused by the gateway itself: nothing
	// goes upstream with the gateway's own powers.
	before := len(g.cl.Impersonations())
	if _, err := execIn(t, g, "anon-token", "a"); !isForbidden(err) || !strings.Contains(err.Error(), "no user") {
		t.Fatalf("token without user: %v, want 403 naming the missing user", err)
	}
	imps := g.cl.Impersonations()
	if len(imps) != before {
		t.Fatalf("the refused request reached the cluster: %+v", imps[before:])
	}
	want := []clustertest.Impersonation{
		{User: "alice", UID: "u-1", Groups: []string{"dev", "qa"}},
		{User: "bob"},
		{User: "alice", UID: "u-1", Groups: []string{"dev", "qa"}},
		{User: "olga", Groups: []string{"ops"}},
	}
	if len(imps) != len(want) {
		t.Fatalf("cluster saw %d requests, want %d: %+v", len(imps), len(want), imps)
	}
	for i, w := range want {
		got := imps[i]
		if got.User != w.User || got.UID != w.UID || strings.Join(got.Groups, ",") != strings.Join(w.Groups, ",") {
			t.Errorf("request %d impersonated %+v, want %+v", i, got, w)
		}
	}
}

// TestCallerImpersonationHeadersIgnored: a caller's own Impersonate-*
// headers never reach the cluster; the caller's identity does.
func TestCallerImpersonationHeadersIgnored(t *testing.T) {
	g, _ := startImpersonating(t)
	cfg := &rest.Config{Host: g.srv.URL, BearerToken: "bob-token",
		Impersonate: rest.ImpersonationConfig{UserName: "system:admin", Groups: []string{"system:masters", "ops"}}}
	rt, up, err := clientspdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(g.srv.URL + "/api/v1/namespaces/a/pods/web-0/exec?command=cat&stdin=true&stdout=true")
	ex, err := remotecommand.NewSPDYExecutorForTransports(rt, up, http.MethodPost, u)
	if err != nil {
		t.Fatal(err)
	}
	err = ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: strings.NewReader("x"), Stdout: &bytes.Buffer{}})
	if err == nil || !strings.Contains(err.Error(), "bob") {
		t.Fatalf("bob posing as system:admin: %v, want bob's 403", err)
	}
	imps := g.cl.Impersonations()
	if len(imps) != 1 || imps[0].User != "bob" || len(imps[0].Groups) != 0 {
		t.Fatalf("cluster saw %+v, want exactly bob", imps)
	}
}

// TestTokenFileReload: a revoked token is refused after a reload, without
// a restart; a broken file keeps the previous tokens.
func TestTokenFileReload(t *testing.T) {
	g, rl := startImpersonating(t)
	if _, err := execIn(t, g, "alice-token", "a"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rl.Path, []byte("ops-token,olga,,ops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rl.Reload(); err != nil {
		t.Fatal(err)
	}
	_, err := execIn(t, g, "alice-token", "a")
	var ae *kubeclient.AuthError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoked token: %v, want 401", err)
	}
	if err := os.WriteFile(rl.Path, []byte("tok,alice,1,dev,extra,fields\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rl.Reload(); err == nil || !strings.Contains(err.Error(), "fields") {
		t.Fatalf("broken file: %v, want an error", err)
	}
	if out, err := execIn(t, g, "ops-token", "a"); err != nil || out != "hi a" {
		t.Fatalf("after a broken file, the previous tokens: %q %v", out, err)
	}
}

// TestClientCertificateIdentity: a client certificate's CN is the user
// and its O the groups the cluster sees.
func TestClientCertificateIdentity(t *testing.T) {
	ca := newCA(t, "wsmux-test-ca")
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	serverCert := ca.issue(t, "gateway", false, time.Now().Add(time.Hour))
	g := startGateway(t, pool, &serverCert)
	g.g.cfg.Impersonate = true
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "carol", Organization: []string{"dev", "oncall"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	out, err := execCat(t, kubeclient.Options{Server: g.srv.URL, TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}, []byte("by cert"))
	if err != nil || string(out) != "by cert" {
		t.Fatalf("exec: %q, %v", out, err)
	}
	imps := g.cl.Impersonations()
	if len(imps) != 1 || imps[0].User != "carol" || strings.Join(imps[0].Groups, ",") != "dev,oncall" {
		t.Fatalf("cluster saw %+v, want carol in dev and oncall", imps)
	}
}
