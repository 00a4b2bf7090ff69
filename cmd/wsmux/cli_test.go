package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testnet"
)

// watchBuf captures a command's output and tells when a line with a given
// text was written (no polling).
type watchBuf struct {
	testnet.Buffer
	mu    sync.Mutex
	waits map[string]chan struct{}
}

func (w *watchBuf) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	s := w.Buffer.String()
	w.mu.Lock()
	for sub, ch := range w.waits {
		if strings.Contains(s, sub) {
			close(ch)
			delete(w.waits, sub)
		}
	}
	w.mu.Unlock()
	return n, err
}

// seen returns a channel closed once sub was written.
func (w *watchBuf) seen(sub string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	if strings.Contains(w.Buffer.String(), sub) {
		close(ch)
		return ch
	}
	if w.waits == nil {
		w.waits = map[string]chan struct{}{}
	}
	if old, ok := w.waits[sub]; ok {
		return old
	}
	w.waits[sub] = ch
	return ch
}

// launch runs a command in-process; ctx nil means real signals. The exit
// code arrives on the channel.
func launch(ctx context.Context, args ...string) (*watchBuf, <-chan int) {
	out := &watchBuf{}
	done := make(chan int, 1)
	go func() {
		a := &app{stdin: strings.NewReader(""), stdout: out, stderr: out, ctx: ctx}
		done <- runApp(a, args)
	}()
	return out, done
}

func waitOrFail(t *testing.T, ch <-chan struct{}, what string, out *watchBuf) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(15 * time.Second):
		t.Fatalf("never saw %s; output:\n%s", what, out.String())
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key as
// PEM files and returns their paths.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "wsmux-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = writeFile(t, "tls.crt", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	keyFile = writeFile(t, "tls.key", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})))
	return certFile, keyFile
}

// silentListener accepts TCP connections (the kernel completes them) and
// never answers: a server that hangs.
func silentListener(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// TestBadInputs is the table of bad inputs: every bad input, its exit code and
// what the message must say. None of them may reach the server when the
// mistake is in the arguments (dialled counts the connections it got).
func TestBadInputs(t *testing.T) {
	tok := writeFile(t, "token", "secret\n")
	certFile, keyFile := selfSigned(t)

	var dialled atomic.Int64
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dialled.Add(1)
		http.Error(w, "counting server", http.StatusTeapot)
	}))
	defer counting.Close()
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Forbidden: not a wsmux server", http.StatusForbidden)
	}))
	defer forbidden.Close()
	unauthorized := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "wsmux: unauthorized: invalid bearer token", http.StatusUnauthorized)
	}))
	defer unauthorized.Close()
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	tlsServer := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsServer.Close()
	tlsServer.Config.ErrorLog = nil
	silent := silentListener(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, busyPort, _ := net.SplitHostPort(busy.Addr().String())
	tlsHost := strings.TrimPrefix(tlsServer.URL, "https://")

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // each must appear in the output
	}{
		{"forward local port out of range", []string{"tunnel", "forward", "--server", counting.URL, "--token-file", tok, "99999:127.0.0.1:19001"},
			exitUsage, []string{`local port "99999"`, "0 to 65535"}},
		{"forward local port in use", []string{"tunnel", "forward", "--server", counting.URL, "--token-file", tok, busyPort + ":127.0.0.1:19001"},
			exitError, []string{"in use", "pick another LOCALPORT"}},
		{"serve --listen without port", []string{"tunnel", "serve", "--listen", "127.0.0.1", "--allow", "127.0.0.1:1", "--token-file", tok},
			exitUsage, []string{`--listen "127.0.0.1"`, "HOST:PORT"}},
		{"serve swapped cert and key", []string{"tunnel", "serve", "--listen", "127.0.0.1:0", "--allow", "127.0.0.1:1", "--token-file", tok,
			"--tls-cert", keyFile, "--tls-key", certFile}, exitUsage, []string{"swapped", "certificate to --tls-cert"}},
		{"serve missing token file", []string{"tunnel", "serve", "--listen", "127.0.0.1:0", "--allow", "127.0.0.1:1", "--token-file", tok + ".missing"},
			exitUsage, []string{"--token-file", "no such file"}},
		{"gateway swapped cert and key", []string{"gateway", "--listen", "127.0.0.1:0", "--token-file", tok,
			"--tls-cert", keyFile, "--tls-key", certFile}, exitUsage, []string{"swapped"}},
		{"port-forward bad port", []string{"port-forward", "--server", counting.URL, "--token-file", tok, "web-0", "abc"},
			exitUsage, []string{`port "abc"`, "1 to 65535"}},
		{"exec without pod", []string{"exec", "--server", counting.URL, "--token-file", tok, "--", "ls"},
			exitUsage, []string{"POD is required"}},
		{"server URL without scheme", []string{"tunnel", "forward", "--server", "127.0.0.1:8080", "--token-file", tok, "0:127.0.0.1:1"},
			exitUsage, []string{"no scheme", "http://127.0.0.1:8080"}},
		{"exec server URL without scheme", []string{"exec", "--server", "gw.example:8443", "--token-file", tok, "web-0", "--", "ls"},
			exitUsage, []string{"no scheme", "https://gw.example:8443"}},
		{"client missing token file", []string{"tunnel", "forward", "--server", counting.URL, "--token-file", tok + ".missing", "0:127.0.0.1:1"},
			exitUsage, []string{"--token-file", "no such file"}},
		{"bad log format", []string{"--log-format", "xml", "version"}, exitUsage, []string{"--log-format"}},
		{"bad buffer size", []string{"tunnel", "serve", "--listen", "127.0.0.1:0", "--allow", "127.0.0.1:1", "--token-file", tok,
			"--max-buffer-per-caller", "12XB"}, exitUsage, []string{"--max-buffer-per-caller", "64MiB"}},
		{"gateway missing token file", []string{"gateway", "--listen", "127.0.0.1:0", "--token-file", tok + ".missing"},
			exitUsage, []string{"--token-file", "no such file"}},
		{"gateway token without user", []string{"gateway", "--listen", "127.0.0.1:0", "--token-file", tok, "--kubeconfig", tok},
			exitUsage, []string{"--token-file", "has no user", "TOKEN,USER", "--impersonate=false"}},
		{"gateway bad policy file", []string{"gateway", "--listen", "127.0.0.1:0", "--token-file", tok, "--impersonate=false", "--policy-file", tok},
			exitUsage, []string{"--policy-file", "policy"}},
		{"gateway null origin", []string{"gateway", "--listen", "127.0.0.1:0", "--token-file", tok, "--impersonate=false", "--allowed-origins", "https://ok.example,null"},
			exitUsage, []string{"--allowed-origins", `"null"`, "cannot be allowed"}},
		{"serve origin with a path", []string{"tunnel", "serve", "--listen", "127.0.0.1:0", "--allow", "127.0.0.1:1", "--token-file", tok,
			"--allowed-origins", "https://app.example/console"}, exitUsage, []string{"--allowed-origins", "SCHEME://HOST[:PORT]"}},
		{"zero idle timeout", []string{"tunnel", "serve", "--listen", "127.0.0.1:0", "--allow", "127.0.0.1:1", "--token-file", tok,
			"--idle-timeout", "0s"}, exitUsage, []string{"--idle-timeout", "positive"}},
		{"negative connection limit", []string{"gateway", "--listen", "127.0.0.1:0", "--token-file", tok, "--impersonate=false", "--max-connections", "-1"},
			exitUsage, []string{"--max-connections", "0 (no limit)"}},
		{"negative stream limit", []string{"gateway", "--listen", "127.0.0.1:0", "--token-file", tok, "--max-streams", "-1"},
			exitUsage, []string{"--max-streams"}},
		{"403 from a server that does not speak wsmux", []string{"tunnel", "forward", "--server", forbidden.URL, "--token-file", tok, "0:127.0.0.1:1"},
			exitError, []string{"403", "does not speak wsmux"}},
		{"exec 403", []string{"exec", "--server", forbidden.URL, "--token-file", tok, "web-0", "--", "ls"},
			exitError, []string{"403", "does not speak wsmux"}},
		{"401 is an authentication failure", []string{"tunnel", "forward", "--server", unauthorized.URL, "--token-file", tok, "0:127.0.0.1:1"},
			exitAuth, []string{"401", "invalid bearer token", "--token-file"}},
		{"exec names its real method", []string{"exec", "--server", notFound.URL, "--token-file", tok, "web-0", "--", "ls"},
			exitError, []string{"GET " + notFound.URL + "/api/v1/namespaces/default/pods/web-0/exec", "404"}},
		{"http:// against TLS", []string{"tunnel", "forward", "--server", "http://" + tlsHost, "--token-file", tok, "0:127.0.0.1:1"},
			exitError, []string{"use https://"}},
		{"exec http:// against TLS", []string{"exec", "--server", "http://" + tlsHost, "--token-file", tok, "web-0", "--", "ls"},
			exitError, []string{"use https://"}},
		{"https:// against plain HTTP", []string{"tunnel", "forward", "--server", "https://" + strings.TrimPrefix(notFound.URL, "http://"), "--token-file", tok, "0:127.0.0.1:1"},
			exitError, []string{"does not speak TLS", "use http://"}},
		{"unknown CA", []string{"tunnel", "forward", "--server", tlsServer.URL, "--token-file", tok, "0:127.0.0.1:1"},
			exitError, []string{"unknown authority", "--ca-file"}},
		{"exec unknown CA", []string{"exec", "--server", tlsServer.URL, "--token-file", tok, "web-0", "--", "ls"},
			exitError, []string{"unknown authority", "--ca-file"}},
		{"dial timeout", []string{"tunnel", "forward", "--server", "http://" + silent, "--dial-timeout", "300ms", "--token-file", tok, "0:127.0.0.1:1"},
			exitError, []string{"no answer within 300ms", "--dial-timeout"}},
		{"exec dial timeout", []string{"exec", "--server", "http://" + silent, "--dial-timeout", "300ms", "--token-file", tok, "web-0", "--", "ls"},
			exitError, []string{"no answer within 300ms", "--dial-timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dialled.Load()
			code, out, errOut := invoke(context.Background(), nil, tc.args...)
			all := out + errOut
			t.Logf("exit %d:\n%s", code, all)
			if code != tc.code {
				t.Errorf("exit %d, want %d; output:\n%s", code, tc.code, all)
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q:\n%s", w, all)
				}
			}
			if strings.Contains(all, "serving") {
				t.Errorf("logged serving before failing:\n%s", all)
			}
			if dialled.Load() != before {
				t.Errorf("connected to the server before finding the bad argument")
			}
		})
	}
}

// TestOpsFeatures: --version and the version command, --log-format json,
// --pprof (off by default), and metrics present at 0 before any event.
func TestOpsFeatures(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, out, _ := invoke(nil, nil, args...)
		if code != 0 || !strings.HasPrefix(out, "wsmux ") || !strings.Contains(out, "go1.") {
			t.Errorf("%v: exit %d, %q", args, code, out)
		}
	}
	tokens := writeFile(t, "tokens", "s3cret\n")
	for _, pprof := range []bool{true, false} {
		addr := freeAddr(t)
		args := []string{"--log-format", "json", "tunnel", "serve", "--listen", addr, "--allow", "127.0.0.1:1", "--token-file", tokens}
		if pprof {
			args = append(args, "--pprof")
		}
		ctx, stop := context.WithCancel(context.Background())
		out, done := launch(ctx, args...)
		waitOrFail(t, out.seen("serving"), "serving", out)
		metrics := get(t, "http://"+addr+"/metrics")
		for _, want := range []string{
			`wsmux_tunnel_refused_total{reason="not_allowed"} 0`,
			`wsmux_auth_failures_total{reason="invalid_token"} 0`,
			`wsmux_errors_total{code="PROTOCOL_ERROR"} 0`,
			`wsmux_limit_refusals_total{limit="sessions_per_caller"} 0`,
			`wsmux_limit{limit="streams_per_session"} 100`,
			`wsmux_sessions_active{protocol="wsmux"} 0`,
			`wsmux_upgrades_total{kind="tunnel",protocol="wsmux"} 0`,
		} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		resp, err := http.Get("http://" + addr + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[bool]int{true: 200, false: 404}[pprof]; resp.StatusCode != want {
			t.Errorf("--pprof=%v: /debug/pprof/ answered %d, want %d", pprof, resp.StatusCode, want)
		}
		http.DefaultClient.CloseIdleConnections()
		stop()
		if code := <-done; code != 0 {
			t.Errorf("exit %d", code)
		}
		for l := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil || m["msg"] == nil {
				t.Errorf("--log-format json: line %q is not a JSON log record", l)
			}
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestDrainDeadlineExitsNonZero: when the drain deadline passes with a
// transfer still running, the server and the forwarder abort it, say so
// and exit 1 (at 7f0589a both exited 0).
func TestDrainDeadlineExitsNonZero(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	target := testnet.Serve(t, func(c net.Conn) {
		_, _ = c.Write([]byte("x"))
		<-hold
	})
	tokens := writeFile(t, "tokens", "s3cret\n")
	serveAddr := freeAddr(t)
	srvCtx, srvStop := context.WithCancel(context.Background())
	defer srvStop()
	srvOut, srvDone := launch(srvCtx, "tunnel", "serve", "--listen", serveAddr, "--allow", target, "--token-file", tokens,
		"--shutdown-timeout", "300ms")
	waitOrFail(t, srvOut.seen("serving"), "the server serving", srvOut)
	local := freeAddr(t)
	fwCtx, fwStop := context.WithCancel(context.Background())
	defer fwStop()
	fwOut, fwDone := launch(fwCtx, "tunnel", "forward", "--server", "http://"+serveAddr, "--token-file", tokens,
		"--drain-timeout", "300ms", local+":"+target)
	waitOrFail(t, fwOut.seen("tunnel: forwarding"), "the forwarder forwarding", fwOut)
	c := testnet.Dial(t, local)
	defer c.Close()
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}

	fwStop() // the forwarder first: its drain ends at its deadline
	select {
	case code := <-fwDone:
		if want := "aborted 1 open connection(s): drain deadline passed"; code != exitError || !strings.Contains(fwOut.String(), want) {
			t.Errorf("forward: exit %d, want %d and %q; output:\n%s", code, exitError, want, fwOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("forward did not stop; output:\n%s", fwOut.String())
	}

	// Now the server's deadline, with a transfer through a new forwarder.
	fwCtx2, fwStop2 := context.WithCancel(context.Background())
	defer fwStop2()
	local2 := freeAddr(t)
	fwOut2, fwDone2 := launch(fwCtx2, "tunnel", "forward", "--server", "http://"+serveAddr, "--token-file", tokens,
		local2+":"+target)
	waitOrFail(t, fwOut2.seen("tunnel: forwarding"), "the second forwarder forwarding", fwOut2)
	c2 := testnet.Dial(t, local2)
	defer c2.Close()
	if _, err := io.ReadFull(c2, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	srvStop()
	select {
	case code := <-srvDone:
		if want := "shutdown aborted 1 session(s) with 1 open stream(s): drain deadline passed"; code != exitError || !strings.Contains(srvOut.String(), want) {
			t.Errorf("serve: exit %d, want %d and %q; output:\n%s", code, exitError, want, srvOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("serve did not stop; output:\n%s", srvOut.String())
	}
	// The server reset the stream and closed the session: the forwarder
	// resets its connection (mux may deliver the session's end as EOF
	// instead when the reset is still queued at the close: then the
	// forwarder ends it with a FIN). Either way nothing is left to drain.
	_, _ = io.ReadAll(c2)
	c2.Close()
	fwStop2()
	if code := <-fwDone2; code != 0 {
		t.Errorf("second forward: exit %d; output:\n%s", code, fwOut2.String())
	}
}
