//go:build unix

package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/internal/testnet"
)

// fleetEnv is a gateway fleet on loopback: a real redis-server as the
// shared state, replicas of `wsmux gateway --shared-state` (the test
// binary run as the command, so that a test can kill one) in front of the
// stand-in cluster, and a real nginx taking them round-robin.
type fleetEnv struct {
	cl       *clustertest.Cluster
	redis    *testnet.Redis
	nginx    *testnet.Nginx
	replicas []*replica
	key      []byte
	tokens   map[string]string // user -> token file
}

// replica is one `wsmux gateway` process.
type replica struct {
	name, addr string
	cmd        *exec.Cmd
	log        *testnet.Buffer
	exited     chan struct{}
}

func startFleet(t *testing.T, n int) *fleetEnv {
	t.Helper()
	e := &fleetEnv{cl: clustertest.Start(t), redis: testnet.StartRedis(t), tokens: map[string]string{}}
	k := sha256.Sum256([]byte("wsmux fleet e2e ticket key"))
	e.key = k[:]
	keyFile := writeFile(t, "ticket.key", base64.StdEncoding.EncodeToString(e.key)+"\n")
	secret := writeFile(t, "fleet.secret", base64.StdEncoding.EncodeToString([]byte("a fleet secret of at least 32 bytes, shared"))+"\n")
	var lines []string
	for _, u := range []string{"alice", "bob", "carol"} {
		lines = append(lines, "tok-"+u+","+u)
		e.tokens[u] = writeFile(t, "token-"+u, "tok-"+u+"\n")
	}
	tokenFile := writeFile(t, "gateway-tokens", strings.Join(lines, "\n")+"\n")
	kubeconfig := writeFile(t, "kubeconfig", e.cl.Kubeconfig())
	var addrs []string
	for i := range n {
		r := &replica{name: fmt.Sprintf("gw-%d", i), addr: freeAddr(t), log: &testnet.Buffer{}, exited: make(chan struct{})}
		r.cmd = exec.Command(os.Args[0], "gateway", "--listen", r.addr, "--token-file", tokenFile, "--kubeconfig", kubeconfig,
			"--ticket-key", keyFile, "--shared-state", e.redis.URL(), "--fleet-listen", "127.0.0.1:0", "--fleet-secret-file", secret,
			"--replica-name", r.name, "--max-sessions-per-caller", "2", "--resume-timeout", "30s", "--shutdown-timeout", "2s")
		r.cmd.Env = append(os.Environ(), envRunCommand+"=1")
		r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = r.cmd.Wait(); close(r.exited) }()
		t.Cleanup(func() {
			_ = r.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-r.exited:
			case <-time.After(15 * time.Second):
				_ = r.cmd.Process.Kill()
				<-r.exited
			}
			if t.Failed() {
				t.Logf("replica %s:\n%s", r.name, r.log.String())
			}
		})
		e.replicas = append(e.replicas, r)
		addrs = append(addrs, r.addr)
	}
	for _, r := range e.replicas {
		waitHTTP(t, "http://"+r.addr+"/healthz")
		r.log.Await(t, "accepting forwarded resumes", 10*time.Second)
	}
	e.nginx = testnet.StartNginxRoundRobin(t, addrs, "proxy_read_timeout 1h;")
	return e
}

func (e *fleetEnv) server() string { return "http://" + e.nginx.Addr }

// ticket mints a ticket for alice to exec cmd in default/web-0 and
// returns the file holding it.
func (e *fleetEnv) ticket(t *testing.T, cmd ...string) string {
	t.Helper()
	c, err := controller.NewClaims(controller.User{Name: "alice"},
		controller.Target{Namespace: "default", Pod: "web-0", Subresource: "exec", Command: cmd}, time.Now(), 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := controller.MintTicket(e.key, c)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "ticket", tk+"\n")
}

// exec runs `wsmux exec -i web-0 -- cmd...` against server with the
// credential in tokenFile.
func exec1(server, tokenFile string, stdin io.Reader, cmd ...string) (int, string, string) {
	args := append([]string{"exec", "--server", server, "--token-file", tokenFile, "-i", "web-0", "--"}, cmd...)
	return invoke(context.Background(), stdin, args...)
}

// metrics returns a replica's /metrics.
func (r *replica) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + r.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// count returns how many times each replica logged substr (since mark,
// the lengths of their logs then).
func (e *fleetEnv) count(substr string, mark []int) []int {
	out := make([]int, len(e.replicas))
	for i, r := range e.replicas {
		s := r.log.String()
		if mark != nil {
			s = s[mark[i]:]
		}
		out[i] = strings.Count(s, substr)
	}
	return out
}

func (e *fleetEnv) mark() []int {
	m := make([]int, len(e.replicas))
	for i, r := range e.replicas {
		m[i] = len(r.log.String())
	}
	return m
}

func sum(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}

// TestGatewayFleet: three replicas of `wsmux gateway --shared-state` on
// a real Redis behind nginx round-robin, used with `wsmux exec`:
//   - a ticket opens one session: used through one replica, it is refused
//     by the other two (ticket_replayed);
//   - a caller at its session limit (2) through two replicas is refused by
//     the third, which holds none of its sessions;
//   - a client whose connection is cut three times resumes through the
//     other replicas (each resume forwarded to the owner), its output
//     arriving whole (sha256);
//   - with Redis stopped, tickets are refused at once (503, "cannot check
//     tickets"), token sessions still run (limits count per replica), the
//     replicas log it and report wsmux_shared_state_up 0; once Redis is
//     back a new ticket works and the one used before is still refused
//     (Redis' append-only file);
//   - the replica holding a session is killed: the client's resume,
//     reaching another replica, gets "unknown session" and the client
//     exits within a second.
func TestGatewayFleet(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	e := startFleet(t, 3)

	usedTicket := e.ticket(t, "cat") // the test's: the outage's subtest uses it again
	t.Run("ticket once across the fleet", func(t *testing.T) {
		for i := range 3 {
			code, out, errOut := exec1(e.server(), usedTicket, strings.NewReader("hello"), "cat")
			switch {
			case i == 0 && (code != 0 || out != "hello"):
				t.Fatalf("first use: exit %d, stdout %q, stderr %q", code, out, errOut)
			case i > 0 && (code != exitAuth || !strings.Contains(errOut, "ticket_replayed")):
				t.Fatalf("use %d: exit %d, stderr %q; want refused as replayed", i+1, code, errOut)
			}
		}
		// Round-robin: the three requests reached the three replicas.
		accepted, replayed := 0, 0
		for _, r := range e.replicas {
			m := r.metrics(t)
			a := strings.Contains(m, "wsmux_tickets_accepted_total 1")
			p := strings.Contains(m, `wsmux_auth_failures_total{reason="ticket_replayed"} 1`)
			if a == p {
				t.Errorf("%s: accepted %v, refused as replayed %v: want exactly one of them", r.name, a, p)
			}
			if a {
				accepted++
			} else if p {
				replayed++
			}
		}
		if accepted != 1 || replayed != 2 {
			t.Fatalf("accepted on %d replica(s), refused on %d; want 1 and 2", accepted, replayed)
		}
	})

	t.Run("session limit across the fleet", func(t *testing.T) {
		mark := e.mark()
		type held struct {
			w    *io.PipeWriter
			done chan int
		}
		var sessions []held
		for i := range 2 {
			pr, pw := io.Pipe()
			out := &testnet.Buffer{}
			h := held{w: pw, done: make(chan int, 1)}
			go func() {
				a := &app{stdin: pr, stdout: out, stderr: io.Discard, ctx: context.Background()}
				h.done <- runApp(a, []string{"exec", "--server", e.server(), "--token-file", e.tokens["bob"], "-i", "web-0", "--", "cat"})
			}()
			fmt.Fprintf(pw, "session %d\n", i)
			out.Await(t, fmt.Sprintf("session %d\n", i), 10*time.Second) // it runs
			sessions = append(sessions, h)
		}
		code, _, errOut := exec1(e.server(), e.tokens["bob"], strings.NewReader(""), "cat")
		if code == 0 || !strings.Contains(errOut, "across the gateway's replicas") {
			t.Errorf("a third session: exit %d, stderr %q; want refused across the fleet", code, errOut)
		}
		started := e.count(`session starting`, mark)
		refused := e.count(`refused a session over the caller's limit`, mark)
		for i := range e.replicas {
			if refused[i] == 1 && started[i] != 0 {
				t.Errorf("%s refused the third session but holds %d of bob's: the fleet's count did not decide", e.replicas[i].name, started[i])
			}
		}
		if sum(refused) != 1 || sum(started) != 2 {
			t.Errorf("sessions started %v, refused %v; want 2 started on two replicas, 1 refused on the third", started, refused)
		}
		for _, h := range sessions {
			h.w.Close()
			if c := <-h.done; c != 0 {
				t.Errorf("a held session exited %d", c)
			}
		}
	})

	t.Run("resume through another replica", func(t *testing.T) {
		want, err := exec.Command("sh", "-c", "seq 1 1400000").Output()
		if err != nil {
			t.Fatal(err)
		}
		mark := e.mark()
		proxy := testnet.NewCutProxy(t, e.nginx.Addr, int64(len(want))/4, 3)
		code, out, errOut := exec1("http://"+proxy.Addr(), e.tokens["alice"], nil, "sh", "-c", "seq 1 1400000")
		if code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, errOut)
		}
		if sha256.Sum256([]byte(out)) != sha256.Sum256(want) {
			t.Fatalf("stdout: %d bytes, want %d; sha256 differs", len(out), len(want))
		}
		if proxy.Cuts() != 3 {
			t.Fatalf("%d cuts, want 3", proxy.Cuts())
		}
		started := e.count("gateway: session starting", mark)
		resumed := e.count("gateway: session resumed", mark)
		forwarded := e.count("resume forwarded to the replica holding the session", mark)
		owner := -1
		for i, n := range started {
			if n == 1 {
				owner = i
			}
		}
		if sum(started) != 1 || owner < 0 {
			t.Fatalf("sessions started per replica %v: want one", started)
		}
		if resumed[owner] != 3 || sum(resumed) != 3 {
			t.Errorf("resumed per replica %v: want all 3 on the owner %s", resumed, e.replicas[owner].name)
		}
		if forwarded[owner] != 0 || sum(forwarded) < 1 {
			t.Errorf("resumes forwarded per replica %v: want at least one by a replica other than the owner %s", forwarded, e.replicas[owner].name)
		}
	})

	t.Run("store down and back", func(t *testing.T) {
		mark := e.mark()
		e.redis.Stop()
		start := time.Now()
		code, _, errOut := exec1(e.server(), e.ticket(t, "cat"), strings.NewReader("x"), "cat")
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("the refusal took %v", el)
		}
		if code == 0 || !strings.Contains(errOut, "cannot check tickets") || !strings.Contains(errOut, "503") {
			t.Errorf("a ticket with Redis down: exit %d, stderr %q; want 503, cannot check tickets", code, errOut)
		}
		if code, out, errOut := exec1(e.server(), e.tokens["carol"], strings.NewReader("still here"), "cat"); code != 0 || out != "still here" {
			t.Errorf("a token session with Redis down: exit %d, stdout %q, stderr %q; want it served (limits per replica)", code, out, errOut)
		}
		refusedBy := -1
		for i, n := range e.count("ticket refused", mark) {
			if n == 1 {
				refusedBy = i
			}
		}
		if refusedBy < 0 {
			t.Fatal("no replica logged the ticket's refusal")
		}
		r := e.replicas[refusedBy]
		r.log.Await(t, "the fleet's shared state is unavailable", 5*time.Second)
		if m := r.metrics(t); !strings.Contains(m, "wsmux_shared_state_up 0") ||
			!strings.Contains(m, `wsmux_auth_failures_total{reason="ticket_store_unavailable"} 1`) {
			t.Errorf("%s's metrics lack wsmux_shared_state_up 0 or the ticket_store_unavailable refusal", r.name)
		}
		e.redis.Start(t)
		r.log.Await(t, "the fleet's shared state is back", 5*time.Second) // its next heartbeat
		if code, out, errOut := exec1(e.server(), e.ticket(t, "cat"), strings.NewReader("back"), "cat"); code != 0 || out != "back" {
			t.Errorf("a new ticket with Redis back: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		if code, _, errOut := exec1(e.server(), usedTicket, strings.NewReader("x"), "cat"); code != exitAuth || !strings.Contains(errOut, "ticket_replayed") {
			t.Errorf("the ticket used before the outage: exit %d, stderr %q; want ticket_replayed", code, errOut)
		}
	})

	t.Run("owner killed", func(t *testing.T) {
		mark := e.mark()
		out, errb := &testnet.Buffer{}, &testnet.Buffer{}
		done := make(chan int, 1)
		// The command waits for its stdin, which ends with the upstream
		// connection of the killed replica.
		pr, pw := io.Pipe()
		defer pw.Close()
		go func() {
			a := &app{stdin: pr, stdout: out, stderr: errb, ctx: context.Background()}
			done <- runApp(a, []string{"exec", "--server", e.server(), "--token-file", e.tokens["alice"], "-i", "web-0", "--", "sh", "-c", "echo started; cat >/dev/null"})
		}()
		out.Await(t, "started", 10*time.Second)
		owner := -1
		for i, n := range e.count("gateway: session starting", mark) {
			if n == 1 {
				owner = i
			}
		}
		if owner < 0 {
			t.Fatal("no replica started the session")
		}
		r := e.replicas[owner]
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.exited
		killed := time.Now()
		select {
		case code := <-done:
			el := time.Since(killed)
			if code == 0 || el > time.Second {
				t.Errorf("exit %d %v after the kill; want a failure within 1s", code, el)
			}
			if !strings.Contains(errb.String(), "does not hold the session") || !strings.Contains(errb.String(), "status=404") {
				t.Errorf("stderr %q: want the resume refused with 404 (unknown session)", errb.String())
			}
			unreachable := 0
			for i, r := range e.replicas {
				if i != owner && strings.Contains(r.metrics(t), `wsmux_resume_forwards_total{outcome="owner_unreachable"} 1`) {
					unreachable++
				}
			}
			if unreachable != 1 {
				t.Errorf("%d replicas counted a resume to an unreachable owner, want 1", unreachable)
			}
			t.Logf("the client ended %v after the owner was killed: %s", el.Round(time.Millisecond), regexp.MustCompile(`\s+`).ReplaceAllString(errb.String(), " "))
		case <-time.After(10 * time.Second):
			t.Fatalf("the client still runs 10s after its replica was killed; stderr:\n%s", errb.String())
		}
	})
}
