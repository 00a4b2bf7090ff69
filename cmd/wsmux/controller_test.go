package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/remotecommand"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/handoff/handofftest"
	"github.com/wsmux/wsmux/internal/testnet"
)

// ctlEnv is `wsmux gateway` with --ticket-key and --handoff-socket in
// front of the stand-in cluster, where alice may use namespace default.
type ctlEnv struct {
	server, sock, keyFile string
	key                   []byte
	cl                    *clustertest.Cluster
}

func startControllerGateway(t *testing.T, allowUID int) *ctlEnv {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the socket handoff needs Linux")
	}
	cl := clustertest.Start(t)
	cl.SetRBAC(map[string][]string{"alice": {"default"}})
	k := sha256.Sum256([]byte("wsmux controller e2e key " + t.Name()))
	e := &ctlEnv{key: k[:], cl: cl, sock: filepath.Join(t.TempDir(), "handoff.sock")}
	e.keyFile = writeFile(t, "ticket.key", "# current key\n"+base64.StdEncoding.EncodeToString(e.key)+"\n")
	addr := freeAddr(t)
	stop := background(t, "gateway", "--listen", addr, "--token-file", writeFile(t, "gateway-tokens", "static,bob\n"),
		"--kubeconfig", writeFile(t, "kubeconfig", cl.Kubeconfig()), "--ticket-key", e.keyFile,
		"--handoff-socket", e.sock, "--handoff-allow-uid", strconv.Itoa(allowUID))
	t.Cleanup(stop)
	e.server = "http://" + addr
	waitHTTP(t, e.server+"/healthz")
	return e
}

func (e *ctlEnv) metrics(t *testing.T, want ...string) {
	t.Helper()
	resp, err := http.Get(e.server + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, w := range want {
		if !strings.Contains(string(b), w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}
}

// startProcess runs a controller and returns the URL it prints
// ("listening on http://...") and its output so far and later.
func startProcess(t *testing.T, name string, args ...string) (string, *testnet.Buffer) {
	t.Helper()
	cmd := exec.Command(name, args...)
	pr, pw := io.Pipe()
	out := &testnet.Buffer{}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		pw.Close()
	})
	sc := bufio.NewScanner(pr)
	re := regexp.MustCompile(`listening on (http://\S+)`)
	for sc.Scan() {
		out.Write([]byte(sc.Text() + "\n"))
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			go func() {
				for sc.Scan() {
					out.Write([]byte(sc.Text() + "\n"))
				}
			}()
			return m[1], out
		}
	}
	t.Fatalf("%s exited before listening:\n%s", name, out.String())
	return "", nil
}

func python(t *testing.T) string {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found in PATH: install Python 3.9 or later to run the Python controller's tests (.ci/run installs it in CI)")
	}
	return py
}

const pyController = "../../examples/controller-python/controller.py"

// usersFile is the Python controller's token file: alice (uid 1001,
// group dev) and carol, who is allowed nothing.
func usersFile(t *testing.T) string {
	return writeFile(t, "users.csv", "# token,user,uid,groups\nctl-alice,alice,1001,\"dev,oncall\"\nctl-carol,carol\n")
}

// TestPythonControllerHandoff: `wsmux exec` to the stdlib Python
// controller, which authenticates it, authorizes it and hands the socket
// to the gateway: the command runs as alice (impersonated), exit codes
// come back, and the controller's refusals (unknown token, a namespace
// alice may not use) stay the controller's.
func TestPythonControllerHandoff(t *testing.T) {
	py := python(t)
	e := startControllerGateway(t, os.Getuid())
	ctl, out := startProcess(t, py, pyController, "--listen", "127.0.0.1:0", "--users", usersFile(t),
		"--allow", "alice=default", "--handoff-socket", e.sock)
	alice := writeFile(t, "alice-token", "ctl-alice\n")
	code, stdout, stderr := invoke(context.Background(), strings.NewReader("hello through the handoff"),
		"exec", "--server", ctl, "--token-file", alice, "-i", "web-0", "--", "cat")
	if code != 0 || stdout != "hello through the handoff" {
		t.Fatalf("exec cat: exit %d, stdout %q, stderr %q\ncontroller:\n%s", code, stdout, stderr, out.String())
	}
	code, stdout, _ = invoke(context.Background(), nil, "exec", "--server", ctl, "--token-file", alice, "web-0", "--", "exit", "7")
	if code != 7 || stdout != "bye" {
		t.Errorf("exec exit 7: exit %d, stdout %q", code, stdout)
	}
	code, _, stderr = invoke(context.Background(), nil, "exec", "--server", ctl, "--token-file", writeFile(t, "bad", "nope\n"), "web-0", "--", "cat")
	if code != exitAuth || !strings.Contains(stderr, "controller: unknown or missing bearer token") {
		t.Errorf("unknown token: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = invoke(context.Background(), nil, "exec", "--server", ctl, "--token-file", alice, "-n", "kube-system", "web-0", "--", "cat")
	if code != exitError || !strings.Contains(stderr, "403") || !strings.Contains(stderr, "alice may not use namespace kube-system") {
		t.Errorf("another namespace: exit %d, stderr %q", code, stderr)
	}
	for _, im := range e.cl.Impersonations() {
		if im.User != "alice" || im.UID != "1001" || strings.Join(im.Groups, ",") != "dev,oncall" {
			t.Errorf("upstream acted as %+v, want alice (1001; dev, oncall)", im)
		}
	}
	if !strings.Contains(out.String(), "controller: handed off alice's exec of default/web-0") {
		t.Errorf("controller output:\n%s", out.String())
	}

	// wsmux port-forward through the controller: its session (and the
	// credential check before it) handed off, the bytes echoed.
	local := freeAddr(t)
	_, port, _ := net.SplitHostPort(local)
	stopPF := background(t, "port-forward", "--server", ctl, "--token-file", alice, "web-0", port+":8080")
	data := make([]byte, 1<<20)
	rand.Read(data)
	c := testnet.Dial(t, local)
	go func() { c.Write(data); c.(*net.TCPConn).CloseWrite() }()
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("port-forward echo: %d of %d bytes, %v", len(got), len(data), err)
	}
	stopPF()
	if !strings.Contains(out.String(), "controller: handed off alice's portforward of default/web-0") {
		t.Errorf("controller output:\n%s", out.String())
	}
	e.metrics(t, `wsmux_upgrades_total{kind="exec",protocol="wsmux"} 2`, `wsmux_upgrades_total{kind="portforward",protocol="wsmux"}`)
}

// TestPythonControllerDisallowedUID: a gateway that allows another uid
// closes the controller's connection; the controller answers 502 and
// the client fails with the reason.
func TestPythonControllerDisallowedUID(t *testing.T) {
	py := python(t)
	e := startControllerGateway(t, os.Getuid()+1)
	ctl, _ := startProcess(t, py, pyController, "--listen", "127.0.0.1:0", "--users", usersFile(t),
		"--allow", "alice=default", "--handoff-socket", e.sock)
	code, _, stderr := invoke(context.Background(), nil, "exec", "--server", ctl, "--token-file", writeFile(t, "t", "ctl-alice\n"), "web-0", "--", "cat")
	if code != exitError || !strings.Contains(stderr, "502") || !strings.Contains(stderr, "--handoff-allow-uid") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	e.metrics(t, `wsmux_handoffs_total{result="peer_not_allowed"} 1`, `wsmux_handoffs_total{result="accepted"} 0`)
	if n, _ := e.cl.Stats(); n != 0 {
		t.Errorf("%d upstream sessions", n)
	}
}

// getTicket asks a ticket-minting controller for exec of pod with
// command and returns the ticket from its 307's Location (and checks the
// JSON body says the same).
func getTicket(t *testing.T, ctl, token, pod string, command ...string) string {
	t.Helper()
	q := url.Values{"command": command, "stdin": {"true"}, "stdout": {"true"}, "stderr": {"true"}}
	req, _ := http.NewRequest("GET", ctl+"/api/v1/namespaces/default/pods/"+pod+"/exec?"+q.Encode(), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusTemporaryRedirect || err != nil {
		t.Fatalf("controller: %s %q", resp.Status, body)
	}
	tk := loc.Query().Get("ticket")
	if !controller.IsTicket(tk) || loc.Query().Get("command") != command[0] || loc.Path != "/api/v1/namespaces/default/pods/"+pod+"/exec" {
		t.Fatalf("Location %s", loc)
	}
	var j struct{ Ticket string }
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && (json.Unmarshal(body, &j) != nil || j.Ticket != tk) {
		t.Errorf("JSON body %q", body)
	}
	return tk
}

// TestPythonControllerTickets: the Python controller mints a ticket and
// redirects; `wsmux exec` with it (as its bearer token) runs once as
// alice; the same ticket again, a ticket for another pod and one signed
// with another key are refused (exit 3) and counted.
func TestPythonControllerTickets(t *testing.T) {
	py := python(t)
	e := startControllerGateway(t, os.Getuid())
	ctl, _ := startProcess(t, py, pyController, "--listen", "127.0.0.1:0", "--users", usersFile(t),
		"--allow", "alice=default", "--ticket-key", e.keyFile, "--gateway", e.server)
	tk := writeFile(t, "ticket", getTicket(t, ctl, "ctl-alice", "web-0", "cat")+"\n")
	run := func(ticketFile, pod string) (int, string, string) {
		return invoke(context.Background(), strings.NewReader("hello with a ticket"),
			"exec", "--server", e.server, "--token-file", ticketFile, "-i", pod, "--", "cat")
	}
	if code, stdout, stderr := run(tk, "web-0"); code != 0 || stdout != "hello with a ticket" {
		t.Fatalf("exec with the ticket: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, _, stderr := run(tk, "web-0"); code != exitAuth || !strings.Contains(stderr, "ticket_replayed") {
		t.Errorf("the same ticket again: exit %d, stderr %q", code, stderr)
	}
	other := writeFile(t, "other", getTicket(t, ctl, "ctl-alice", "web-0", "cat")+"\n")
	if code, _, stderr := run(other, "web-1"); code != exitAuth || !strings.Contains(stderr, "ticket_wrong_target") {
		t.Errorf("another pod: exit %d, stderr %q", code, stderr)
	}
	c, _ := controller.NewClaims(controller.User{Name: "alice"}, controller.Target{Namespace: "default", Pod: "web-0", Subresource: "exec"}, time.Now(), 30*time.Second)
	forged, _ := controller.MintTicket(make([]byte, 32), c)
	if code, _, stderr := run(writeFile(t, "forged", forged+"\n"), "web-0"); code != exitAuth || !strings.Contains(stderr, "ticket_bad_mac") {
		t.Errorf("another key: exit %d, stderr %q", code, stderr)
	}
	if imps := e.cl.Impersonations(); len(imps) != 1 || imps[0].User != "alice" || imps[0].UID != "1001" {
		t.Errorf("upstream %+v, want alice once", imps)
	}
	e.metrics(t, `wsmux_tickets_accepted_total 1`, `wsmux_auth_failures_total{reason="ticket_replayed"} 1`,
		`wsmux_auth_failures_total{reason="ticket_wrong_target"} 1`, `wsmux_auth_failures_total{reason="ticket_bad_mac"} 1`)
}

// TestGoExampleController builds examples/controller-go and runs it in
// both modes against the gateway.
func TestGoExampleController(t *testing.T) {
	e := startControllerGateway(t, os.Getuid())
	bin := filepath.Join(t.TempDir(), "controller-go")
	// The example belongs to the core module: build it from its own folder.
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = "../../examples/controller-go"
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tokenFile := writeFile(t, "go-token", "ctl-go\n")
	handoff, _ := startProcess(t, bin, "-listen", "127.0.0.1:0", "-token", "ctl-go", "-handoff-socket", e.sock)
	code, stdout, stderr := invoke(context.Background(), strings.NewReader("hello from Go"), "exec", "--server", handoff, "--token-file", tokenFile, "-i", "web-0", "--", "cat")
	if code != 0 || stdout != "hello from Go" {
		t.Errorf("handoff: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	tickets, _ := startProcess(t, bin, "-listen", "127.0.0.1:0", "-token", "ctl-go", "-ticket-key", e.keyFile, "-gateway", e.server)
	tk := writeFile(t, "go-ticket", getTicket(t, tickets, "ctl-go", "web-0", "cat")+"\n")
	code, stdout, stderr = invoke(context.Background(), strings.NewReader("ticket from Go"), "exec", "--server", e.server, "--token-file", tk, "-i", "web-0", "--", "cat")
	if code != 0 || stdout != "ticket from Go" {
		t.Errorf("ticket: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	e.metrics(t, `wsmux_handoffs_total{result="accepted"} 1`, `wsmux_tickets_accepted_total 1`)
}

// TestPythonControllerKeepsBytesAlreadyRead: a client sends its first
// wsmux frame right behind the upgrade request; the Python controller
// reads both and hands off all it read; the session works and the bytes
// come back.
func TestPythonControllerKeepsBytesAlreadyRead(t *testing.T) {
	py := python(t)
	e := startControllerGateway(t, os.Getuid())
	ctl, out := startProcess(t, py, pyController, "--listen", "127.0.0.1:0", "--users", usersFile(t),
		"--allow", "alice=default", "--handoff-socket", e.sock)
	u, _ := url.Parse(ctl + "/api/v1/namespaces/default/pods/web-0/exec?command=cat&stdin=true&stdout=true&stderr=true")
	ex, err := handofftest.EarlyExecutor(u, "ctl-alice")
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 256<<10)
	rand.Read(data)
	var got bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: bytes.NewReader(data), Stdout: &got, Stderr: io.Discard})
	m := regexp.MustCompile(`(\d+) past the head`).FindStringSubmatch(out.String())
	if m == nil || m[1] == "0" {
		t.Fatalf("the controller did not read the client's first frame with the request (the test sent it too late):\n%s", out.String())
	}
	if err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("exec: %d of %d bytes back, %v", got.Len(), len(data), err)
	}
	t.Logf("the Python controller handed off %s bytes it had read past the request head", m[1])
}

// TestExecFollowsTicketRedirect: `wsmux exec --server CONTROLLER` against
// a ticket-minting controller follows its 307 to the gateway with the
// ticket in the URL; the token it sent the controller is not sent on.
func TestExecFollowsTicketRedirect(t *testing.T) {
	py := python(t)
	e := startControllerGateway(t, os.Getuid())
	ctl, _ := startProcess(t, py, pyController, "--listen", "127.0.0.1:0", "--users", usersFile(t),
		"--allow", "alice=default", "--ticket-key", e.keyFile, "--gateway", e.server)
	alice := writeFile(t, "alice", "ctl-alice\n")
	code, stdout, stderr := invoke(context.Background(), strings.NewReader("redirected"),
		"exec", "--server", ctl, "--token-file", alice, "-i", "web-0", "--", "cat")
	if code != 0 || stdout != "redirected" {
		t.Fatalf("exec through the redirect: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	e.metrics(t, `wsmux_tickets_accepted_total 1`)

	// What the redirect's target receives.
	seen := make(chan *http.Request, 1)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r
		http.Error(w, "fake gateway", http.StatusUnauthorized)
	}))
	defer fake.Close()
	ctl2, _ := startProcess(t, py, pyController, "--listen", "127.0.0.1:0", "--users", usersFile(t),
		"--allow", "alice=default", "--ticket-key", e.keyFile, "--gateway", fake.URL)
	code, _, _ = invoke(context.Background(), nil, "exec", "--server", ctl2, "--token-file", alice, "web-0", "--", "cat")
	r := <-seen
	if code != exitAuth || r.Header.Get("Authorization") != "" || !controller.IsTicket(r.URL.Query().Get("ticket")) {
		t.Errorf("redirected: exit %d, Authorization %q, query %q", code, r.Header.Get("Authorization"), r.URL.RawQuery)
	}
}
