package ticket

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/leakcheck"

	"github.com/wsmux/wsmux/adapters/httpstream"
	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/kubeclient"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/internal/testnet"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m, testnet.IgnoredGoroutines()...) }

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func TestReadKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	b64 := func(b byte) string { return base64.StdEncoding.EncodeToString(key(b)) }
	one := write("one", "# current\n"+b64(1)+"\n\n")
	two := write("two", b64(1)+"\n"+b64(2)+"\n")
	next := write("next", b64(2)+"\n")
	keys, err := ReadKeys([]string{one, next})
	if err != nil || len(keys) != 2 || !bytes.Equal(keys[1], key(2)) {
		t.Fatalf("%d keys, %v", len(keys), err)
	}
	if keys, err := ReadKeys([]string{two}); err != nil || len(keys) != 2 {
		t.Fatalf("two in one file: %d keys, %v", len(keys), err)
	}
	for name, tc := range map[string]struct {
		paths []string
		want  string
	}{
		"three keys":  {[]string{two, write("three", b64(3))}, "at most 2"},
		"the same":    {[]string{one, two}, "the same key"},
		"short":       {[]string{write("short", base64.StdEncoding.EncodeToString(make([]byte, 31)))}, "at least 32"},
		"not base64":  {[]string{write("hex", "0x"+strings.Repeat("ab", 32))}, "base64"},
		"empty":       {[]string{write("empty", "# none\n")}, "no key"},
		"no file":     {[]string{filepath.Join(dir, "missing")}, "no such file"},
		"one too few": {[]string{two, next}, "the same key"},
	} {
		if _, err := ReadKeys(tc.paths); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// clock is a fake clock tests move by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }
func newClock() *clock               { return &clock{now: time.Unix(1767225600, 0)} }
func reasonOf(err error) string {
	var te *controller.TicketError
	errors.As(err, &te)
	return te.Reason
}
func mint(t testing.TB, k []byte, c controller.Claims) string {
	t.Helper()
	tk, err := controller.MintTicket(k, c)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func claims(t testing.TB, now time.Time, pod string) controller.Claims {
	c, err := controller.NewClaims(controller.User{Name: "alice", UID: "1001", Groups: []string{"dev"}},
		controller.Target{Namespace: "default", Pod: pod, Subresource: "exec"}, now, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestVerifierOnceThenExpiry: a ticket passes once; its replay is refused
// while it is remembered; after it expires it is refused as expired and
// forgotten; the limit on remembered tickets refuses, never forgets early.
func TestVerifierOnceThenExpiry(t *testing.T) {
	clk := newClock()
	v := &Verifier{Now: clk.Now, MaxOutstanding: 3}
	v.SetKeys([][]byte{key(1)})
	target := controller.Target{Namespace: "default", Pod: "web-0", Subresource: "exec"}
	tk := mint(t, key(1), claims(t, clk.Now(), "web-0"))
	if _, err := v.Verify(tk, target); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(tk, target); reasonOf(err) != controller.ReasonReplayed {
		t.Fatalf("replay: %v", err)
	}
	for range 2 {
		if _, err := v.Verify(mint(t, key(1), claims(t, clk.Now(), "web-0")), target); err != nil {
			t.Fatal(err)
		}
	}
	fourth := mint(t, key(1), claims(t, clk.Now(), "web-0"))
	if _, err := v.Verify(fourth, target); !errors.Is(err, ErrFull) || v.Outstanding() != 3 {
		t.Fatalf("over MaxOutstanding: %v, %d remembered", err, v.Outstanding())
	}
	clk.Add(30 * time.Second)
	if _, err := v.Verify(tk, target); reasonOf(err) != controller.ReasonExpired {
		t.Fatalf("after exp: %v", err)
	}
	if _, err := v.Verify(mint(t, key(1), claims(t, clk.Now(), "web-0")), target); err != nil || v.Outstanding() != 1 {
		t.Fatalf("after the others expired: %v, %d remembered", err, v.Outstanding())
	}
}

type gw struct {
	g     *gateway.Gateway
	v     *Verifier
	clk   *clock
	cl    *clustertest.Cluster
	url   string
	token string
	logs  *testnet.Buffer
}

// startGateway runs a gateway (static token "static" for bob, and
// tickets signed with key(1) or key(2)) in front of a stand-in cluster.
func startGateway(t *testing.T) *gw {
	cl := clustertest.Start(t)
	logs := &testnet.Buffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, testnet.LogWriter{T: t}), nil))
	g, err := gateway.New(gateway.Config{
		Auth:        auth.NewWithUsers([]auth.Token{{Token: "static", User: controller.User{Name: "bob"}}}, nil),
		Impersonate: true, Cluster: cl.RestConfig(), Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	v := &Verifier{Now: clk.Now}
	v.SetKeys([][]byte{key(1), key(2)})
	h, err := NewHandler(Config{Verifier: v, Next: g.Handler(), ServeAs: g.ServeAs, Metrics: g.Metrics(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.Metrics().Sessions.Drain(ctx)
	})
	return &gw{g: g, v: v, clk: clk, cl: cl, url: srv.URL, logs: logs}
}

// exec runs cat through the gateway with the ticket (or token) as the
// bearer token, as `wsmux exec --token-file` does, and checks the bytes.
func (g *gw) exec(t *testing.T, token, pod string) error {
	t.Helper()
	data := make([]byte, 256<<10)
	rand.Read(data)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := kubeclient.Exec(ctx, kubeclient.Options{Server: g.url, Token: token}, kubeclient.ExecOptions{
		Namespace: "default", Pod: pod, Command: []string{"cat"}, Stdin: bytes.NewReader(data), Stdout: &out, Stderr: io.Discard,
	})
	if err == nil && sha256.Sum256(out.Bytes()) != sha256.Sum256(data) {
		t.Fatalf("stdout: %d bytes, differs from the %d sent", out.Len(), len(data))
	}
	return err
}

func (g *gw) metric(t *testing.T, want ...string) {
	t.Helper()
	rec := httptest.NewRecorder()
	g.g.Metrics().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, w := range want {
		if !strings.Contains(rec.Body.String(), w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}
}

func is401(err error, text string) bool {
	var ue *httpstream.UpgradeError
	return errors.As(err, &ue) && ue.StatusCode == http.StatusUnauthorized && strings.Contains(string(ue.Body), text)
}

// TestTicketsThroughGateway: exec with a ticket as the bearer token runs
// as the ticket's user (impersonated upstream); the same ticket again, an
// expired one, one for another pod and one with a bad MAC are refused
// with 401, each logged and counted; a ticket signed with the second key
// passes until that key is dropped.
func TestTicketsThroughGateway(t *testing.T) {
	g := startGateway(t)
	tk := mint(t, key(1), claims(t, g.clk.Now(), "web-0"))
	if err := g.exec(t, tk, "web-0"); err != nil {
		t.Fatal(err)
	}
	imps := g.cl.Impersonations()
	if len(imps) != 1 || imps[0].User != "alice" || imps[0].UID != "1001" || strings.Join(imps[0].Groups, ",") != "dev" {
		t.Fatalf("upstream impersonation %+v, want alice/1001/dev once", imps)
	}
	if err := g.exec(t, tk, "web-0"); !is401(err, "already used") {
		t.Fatalf("replayed: %v", err)
	}
	expiring := mint(t, key(1), claims(t, g.clk.Now(), "web-0"))
	g.clk.Add(31 * time.Second)
	if err := g.exec(t, expiring, "web-0"); !is401(err, "expired") {
		t.Fatalf("expired: %v", err)
	}
	if err := g.exec(t, mint(t, key(1), claims(t, g.clk.Now(), "web-0")), "web-1"); !is401(err, "not exec of pod default/web-1") {
		t.Fatalf("another pod: %v", err)
	}
	if err := g.exec(t, mint(t, key(3), claims(t, g.clk.Now(), "web-0")), "web-0"); !is401(err, "MAC") {
		t.Fatalf("bad MAC: %v", err)
	}
	second := mint(t, key(2), claims(t, g.clk.Now(), "web-0"))
	if err := g.exec(t, second, "web-0"); err != nil {
		t.Fatalf("second key: %v", err)
	}
	g.v.SetKeys([][]byte{key(1)})
	if err := g.exec(t, mint(t, key(2), claims(t, g.clk.Now(), "web-0")), "web-0"); !is401(err, "MAC") {
		t.Fatalf("key dropped: %v", err)
	}
	if err := g.exec(t, "static", "web-0"); err != nil {
		t.Fatalf("static token next to tickets: %v", err)
	}
	if n, _ := g.cl.Stats(); n != 3 {
		t.Errorf("%d upstream sessions, want 3 (two tickets, one token): a refused ticket reached the cluster", n)
	}
	g.metric(t, `wsmux_auth_failures_total{reason="ticket_replayed"} 1`, `wsmux_auth_failures_total{reason="ticket_expired"} 1`,
		`wsmux_auth_failures_total{reason="ticket_wrong_target"} 1`, `wsmux_auth_failures_total{reason="ticket_bad_mac"} 2`,
		`wsmux_tickets_accepted_total 2`)
	for _, r := range []string{"ticket_replayed", "ticket_expired", "ticket_wrong_target", "ticket_bad_mac"} {
		if !strings.Contains(g.logs.String(), "reason="+r) {
			t.Errorf("no log line for %s", r)
		}
	}
}

// TestTicketCacheFull: with MaxOutstanding tickets remembered, the next
// is refused with 503 and Retry-After (and counted), not let through.
func TestTicketCacheFull(t *testing.T) {
	clk := newClock()
	v := &Verifier{Now: clk.Now, MaxOutstanding: 1}
	v.SetKeys([][]byte{key(1)})
	m := ops.NewMetrics()
	served := 0
	h, err := NewHandler(Config{Verifier: v, Next: http.NotFoundHandler(), Metrics: m, Logger: slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil)),
		ServeAs: func(http.ResponseWriter, *http.Request, controller.User) { served++ }})
	if err != nil {
		t.Fatal(err)
	}
	codes := []int{}
	for range 2 {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/api/v1/namespaces/default/pods/web-0/exec", nil)
		r.Header.Set("Authorization", "Bearer "+mint(t, key(1), claims(t, clk.Now(), "web-0")))
		h.ServeHTTP(rec, r)
		codes = append(codes, rec.Code)
		if rec.Code == http.StatusServiceUnavailable && rec.Header().Get("Retry-After") == "" {
			t.Error("503 without Retry-After")
		}
	}
	if served != 1 || codes[1] != http.StatusServiceUnavailable || ops.Value(m.AuthFailures.WithLabelValues(ReasonFull)) != 1 {
		t.Fatalf("served %d, codes %v", served, codes)
	}
}

// TestTicketInQueryAndSubprotocol: browsers cannot set headers; the
// ticket comes as ?ticket= or as Kubernetes' bearer subprotocol. It is
// taken out of the request before the gateway sees it.
func TestTicketInQueryAndSubprotocol(t *testing.T) {
	g := startGateway(t)
	var seen []*http.Request
	h, err := NewHandler(Config{Verifier: g.v, Next: http.NotFoundHandler(), Metrics: ops.NewMetrics(), Logger: slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil)),
		ServeAs: func(w http.ResponseWriter, r *http.Request, u controller.User) {
			seen = append(seen, r)
			if u.Name != "alice" || u.ID != "ticket:alice" {
				t.Errorf("caller %+v", u)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/namespaces/default/pods/web-0/exec?command=ls&command=-l&stdout=true"
	r := httptest.NewRequest("GET", path+"&ticket="+mint(t, key(1), claims(t, g.clk.Now(), "web-0")), nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	r = httptest.NewRequest("GET", path, nil)
	r.Header.Set("Sec-WebSocket-Protocol", "v5.channel.k8s.io, "+auth.BearerProtocolPrefix+
		base64.RawURLEncoding.EncodeToString([]byte(mint(t, key(1), claims(t, g.clk.Now(), "web-0")))))
	h.ServeHTTP(rec, r)
	if len(seen) != 2 {
		t.Fatalf("%d requests served, want 2: %d %s", len(seen), rec.Code, rec.Body)
	}
	for _, r := range seen {
		if r.URL.RawQuery != "command=ls&command=-l&stdout=true" || r.Header.Get("Sec-Websocket-Protocol") != strings.Split(r.Header.Get("Sec-Websocket-Protocol"), ",")[0] || strings.Contains(r.RequestURI, "ticket") {
			t.Errorf("passed on: %q %q %q", r.URL.RawQuery, r.RequestURI, r.Header.Values("Sec-Websocket-Protocol"))
		}
	}
	if seen[1].Header.Get("Sec-Websocket-Protocol") != "v5.channel.k8s.io" {
		t.Errorf("subprotocols passed on %q", seen[1].Header.Values("Sec-Websocket-Protocol"))
	}
	for name, target := range map[string]string{"undecodable query": path + "&ticket=%zz", "other path": "/api/v1/namespaces/default/pods/web-0?ticket=" + mint(t, key(1), claims(t, g.clk.Now(), "web-0"))} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		if rec.Code != http.StatusUnauthorized || len(seen) != 2 {
			t.Errorf("%s: %d, %d served", name, rec.Code, len(seen))
		}
	}
}

// TestAmbiguousTickets: a request that carries more than one credential
// (two Authorization headers, a ticket both in the header and in the
// query, two ticket parameters, two bearer subprotocols) is refused with
// 400 before any ticket is spent, whichever is valid, and counted. Before,
// the first one found was served.
func TestAmbiguousTickets(t *testing.T) {
	clk := newClock()
	v := &Verifier{Now: clk.Now}
	v.SetKeys([][]byte{key(1)})
	m := ops.NewMetrics()
	served := 0
	h, err := NewHandler(Config{Verifier: v, Metrics: m, Logger: slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil)),
		Next:    http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }),
		ServeAs: func(http.ResponseWriter, *http.Request, controller.User) { served++ }})
	if err != nil {
		t.Fatal(err)
	}
	const path = "/api/v1/namespaces/default/pods/web-0/exec?command=ls&stdout=true"
	tk := func() string { return mint(t, key(1), claims(t, clk.Now(), "web-0")) }
	proto := func(s string) string {
		return auth.BearerProtocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(s))
	}
	for _, tc := range []struct {
		name   string
		target string
		header http.Header
	}{
		{"two Authorization headers", path, http.Header{"Authorization": {"Bearer " + tk(), "Bearer static"}}},
		{"two tickets joined in one header", path, http.Header{"Authorization": {"Bearer " + tk() + ", Bearer " + tk()}}},
		{"header and query", path + "&ticket=" + tk(), http.Header{"Authorization": {"Bearer " + tk()}}},
		{"two query parameters", path + "&ticket=" + tk() + "&ticket=" + tk(), nil},
		{"two subprotocols", path, http.Header{"Sec-Websocket-Protocol": {"v5.channel.k8s.io, " + proto(tk()) + ", " + proto(tk())}}},
		{"subprotocol and query", path + "&ticket=" + tk(), http.Header{"Sec-Websocket-Protocol": {"v5.channel.k8s.io, " + proto(tk())}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", tc.target, nil)
			for k, vs := range tc.header {
				r.Header[k] = vs
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "exactly one") {
				t.Errorf("%d %q, want 400 saying to send exactly one", rec.Code, rec.Body.String())
			}
		})
	}
	if served != 0 {
		t.Errorf("%d ambiguous requests served", served)
	}
	if got := ops.Value(m.BadRequests.WithLabelValues(auth.ReasonAmbiguous)); got != 6 {
		t.Errorf("wsmux_bad_requests_total{reason=%q} = %v, want 6", auth.ReasonAmbiguous, got)
	}
}
