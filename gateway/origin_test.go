package gateway

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	clientspdy "k8s.io/client-go/transport/spdy"

	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/gateway/origin"
	"github.com/wsmux/wsmux/internal/testnet"
)

// withOrigin sends every request with an Origin header, as a browser
// does for the page that makes it.
type withOrigin struct {
	http.RoundTripper
	origin string
}

func (o withOrigin) RoundTrip(r *http.Request) (*http.Response, error) {
	if o.origin != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Origin", o.origin)
	}
	return o.RoundTripper.RoundTrip(r)
}

// mtlsGateway runs a TLS gateway that accepts client certificates of its
// CA (and callerToken) and the given origins; it returns the gateway, the
// logs, and alice's client certificate with the CA pool.
func mtlsGateway(t *testing.T, allowed ...string) (*gw, *testnet.Buffer, tls.Certificate, *x509.CertPool, pki) {
	t.Helper()
	ca := newCA(t, "wsmux-test-ca")
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	serverCert := ca.issue(t, "gateway", false, time.Now().Add(time.Hour))
	pol, err := origin.Parse(allowed)
	if err != nil {
		t.Fatal(err)
	}
	cl := clustertest.Start(t)
	logs := &testnet.Buffer{}
	g, err := New(Config{Auth: auth.New([]string{callerToken}, pool), Origins: pol, Cluster: cl.RestConfig(),
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(logs, testnet.LogWriter{T: t}), nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(g.Handler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequestClientCert, NextProtos: []string{"http/1.1"}}
	srv.StartTLS()
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.Metrics().Sessions.Drain(ctx)
	})
	return &gw{g: g, srv: srv, cl: cl}, logs, ca.issue(t, "alice", true, time.Now().Add(time.Hour)), pool, ca
}

// execAs runs cat of "ping" through the gateway over proto ("wsmux",
// "spdy" or "v5") with the client certificate (and no token), from a page
// of the given origin ("": not a browser).
func execAs(t *testing.T, server, proto, pageOrigin string, cert tls.Certificate, pool *x509.CertPool, ca pki) error {
	t.Helper()
	u := server + "/api/v1/namespaces/default/pods/web-0/exec?command=cat&stdin=true&stdout=true"
	tlsCfg := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}
	key, _ := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	cfg := &rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{
		CAData:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}),
		CertData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}),
		KeyData:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: key}),
	}}
	pu, _ := url.Parse(u)
	var ex remotecommand.Executor
	var err error
	switch proto {
	case "wsmux":
		var rt *wsmuxhttpstream.RoundTripper
		if rt, err = wsmuxhttpstream.NewRoundTripperWithConfig(wsmuxhttpstream.RoundTripperConfig{TLS: tlsCfg}); err == nil {
			ex, err = remotecommand.NewSPDYExecutorForTransports(withOrigin{rt, pageOrigin}, rt, http.MethodPost, pu)
		}
	case "spdy":
		rt, up, err2 := clientspdy.RoundTripperFor(cfg)
		if err = err2; err == nil {
			ex, err = remotecommand.NewSPDYExecutorForTransports(withOrigin{rt, pageOrigin}, up, http.MethodPost, pu)
		}
	case "v5":
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return withOrigin{rt, pageOrigin} }
		ex, err = remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, u)
	}
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("ping"), Stdout: &out})
	if err == nil && out.String() != "ping" {
		t.Fatalf("stdout %q", out.String())
	}
	return err
}

// TestCrossOriginRefused: a page of another site cannot use the browser's
// client certificate to exec (cross-site WebSocket hijacking), over any
// protocol: an upgrade whose Origin is neither the gateway's own nor
// allowed is refused with 403 saying what to do, counted and logged with
// the caller; without Origin (kubectl, client-go, wsmux), from the
// gateway's own origin and from an allowed one the exec runs. Before, it
// ran whatever the Origin.
func TestCrossOriginRefused(t *testing.T) {
	g, logs, alice, pool, ca := mtlsGateway(t, "https://console.example", "HTTPS://Other.Example:8443/")
	own := g.srv.URL // https://127.0.0.1:PORT
	_, port, _ := strings.Cut(strings.TrimPrefix(own, "https://"), ":")
	refused := 0
	for _, proto := range []string{"wsmux", "spdy", "v5"} {
		for _, tc := range []struct {
			origin string
			ok     bool
		}{
			{"", true},
			{own, true},
			{strings.ToUpper(own), true},
			{"https://console.example", true},
			{"https://console.example:443", true},
			{"https://other.example:8443", true},
			{"https://evil.example", false},
			{"null", false},
			{"http://127.0.0.1:" + port, false},     // the scheme differs
			{"https://127.0.0.1:1" + port, false},   // the port differs
			{"https://localhost:" + port, false},    // the host differs
			{"https://other.example", false},        // an allowed host, another port
			{"http://console.example", false},       // an allowed host, another scheme
			{"https://console.example.evil", false}, // a suffix
			{"https://evil.example/console", false}, // not an origin
		} {
			t.Run(proto+" "+tc.origin, func(t *testing.T) {
				err := execAs(t, g.srv.URL, proto, tc.origin, alice, pool, ca)
				if tc.ok && err != nil {
					t.Fatalf("exec refused: %v", err)
				}
				if !tc.ok {
					if err == nil {
						t.Fatal("exec ran: a page of another origin used the browser's client certificate")
					}
					refused++
					if proto == "wsmux" && (!strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "--allowed-origins")) {
						t.Errorf("%v: want a 403 saying to add the origin to --allowed-origins", err)
					}
				}
			})
		}
	}
	if v := ops.Value(g.g.Metrics().BadRequests.WithLabelValues("cross_origin")); v != float64(refused) {
		t.Errorf("wsmux_bad_requests_total{reason=\"cross_origin\"} = %v, want %d", v, refused)
	}
	n := 0
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "refused: Origin") {
			n++
			if !strings.Contains(l, "caller=cert:alice") {
				t.Errorf("refusal without the caller: %s", l)
			}
		}
	}
	if n != refused {
		t.Errorf("%d refusal lines, want %d", n, refused)
	}
}

// TestCrossOriginOtherRequests: the Origin check covers every request a
// credential authorizes, not only upgrades: a proxied request (the pod's
// GET) from another origin is refused too, and so is a request with two
// Origin headers, whatever the credential (here a bearer token).
func TestCrossOriginOtherRequests(t *testing.T) {
	g, _, _, pool, _ := mtlsGateway(t)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	for _, tc := range []struct {
		name   string
		origin []string
		want   int
	}{
		{"no Origin", nil, http.StatusOK},
		{"own", []string{g.srv.URL}, http.StatusOK},
		{"another site", []string{"https://evil.example"}, http.StatusForbidden},
		{"two headers", []string{g.srv.URL, "https://evil.example"}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, g.srv.URL+"/api/v1/namespaces/default/pods/web-0", nil)
			req.Header.Set("Authorization", "Bearer "+callerToken)
			req.Header["Origin"] = tc.origin
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("%d %s, want %d", resp.StatusCode, body, tc.want)
			}
			if tc.want == http.StatusForbidden && !strings.Contains(string(body), "--allowed-origins") {
				t.Errorf("%s: the refusal does not say what to do", body)
			}
		})
	}
}
