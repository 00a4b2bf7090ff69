package ops

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHealth(t *testing.T) {
	var h Health
	w := httptest.NewRecorder()
	h.ServeHTTP(w, nil)
	if w.Code != 200 {
		t.Fatal(w.Code)
	}
	h.SetStopping()
	w = httptest.NewRecorder()
	h.ServeHTTP(w, nil)
	if w.Code != 503 {
		t.Fatal(w.Code)
	}
}

func TestTrackerMetrics(t *testing.T) {
	m := NewMetrics()
	closed := false
	var done func()
	done = m.Sessions.Add("spdy", nil, func() { closed = true; done() }) // closing ends it
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	body := get(t, srv.URL)
	for _, want := range []string{`wsmux_sessions_active{protocol="spdy"} 1`, `wsmux_sessions_total{protocol="spdy"} 1`, "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// Drain with an expired context closes what is left.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if m.Sessions.Drain(ctx) || !closed {
		t.Fatal("drain did not close the session")
	}
	done()
	done() // idempotent
	if m.Sessions.Len() != 0 || !strings.Contains(get(t, srv.URL), `wsmux_sessions_active{protocol="spdy"} 0`) {
		t.Fatal("session still counted")
	}
}

func get(t testing.TB, u string) string {
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestServeTLSAndShutdown: Serve with --tls-cert/--tls-key files, then a
// graceful stop with nothing to drain.
func TestServeTLSAndShutdown(t *testing.T) {
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var h Health
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, &h, ServerOptions{TLSCert: certFile, TLSKey: keyFile, ShutdownTimeout: time.Second}, NewTracker(), &h)
	}()
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get("https://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c.CloseIdleConnections()
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
}
