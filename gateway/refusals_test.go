package gateway

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/internal/testnet"
	"github.com/wsmux/wsmux/mux"
)

// refusal is one way the gateway refuses an authenticated caller.
type refusal struct {
	name   string
	token  string // alice's unless set
	method string
	path   string
	header http.Header
	status int
	line   string // the refusal's log message
}

// upgradeHeader is an upgrade request's header: proto "spdy", or a
// WebSocket subprotocol (without Sec-WebSocket-Key: a broken handshake
// unless key is set).
func upgradeHeader(proto string, kv ...string) http.Header {
	h := http.Header{"Connection": {"Upgrade"}}
	if proto == "spdy" {
		h.Set("Upgrade", "SPDY/3.1")
	} else {
		h.Set("Upgrade", "websocket")
		h.Set("Sec-Websocket-Version", "13")
		h.Set("Sec-Websocket-Protocol", proto)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

const execPath = "/api/v1/namespaces/default/pods/web-0/exec?command=cat&stdin=true&stdout=true"

// refusalCases are the gateway's refusals of an authenticated caller.
// Every WebSocket handshake below lacks its key: the gateway gets as far
// as the upgrade, which fails.
var refusalCases = []refusal{
	{name: "upgrade on another path", method: "POST", path: "/api/v1/namespaces/default/pods/web-0/logs",
		header: upgradeHeader("spdy", "X-Stream-Protocol-Version", "v4.channel.k8s.io"), status: 400, line: "bad request: path must be"},
	{name: "not an upgrade", method: "POST", path: execPath, status: 400, line: "bad request: expected a WebSocket upgrade"},
	{name: "SPDY without a protocol version", method: "POST", path: execPath, header: upgradeHeader("spdy"), status: 400,
		line: "bad request: missing X-Stream-Protocol-Version"},
	{name: "wsmux handshake without a key", method: "GET", path: execPath,
		header: upgradeHeader(mux.Subprotocol, "X-Stream-Protocol-Version", "v4.channel.k8s.io"), status: 400, line: "invalid WebSocket handshake"},
	{name: "v4 handshake without a key", method: "GET", path: execPath, header: upgradeHeader("v4.channel.k8s.io"), status: 400,
		line: "invalid WebSocket handshake"},
	{name: "v5 handshake without a key", method: "GET", path: execPath, header: upgradeHeader("v5.channel.k8s.io"), status: 400,
		line: "invalid WebSocket handshake"},
	{name: "port-forward tunnel handshake without a key", method: "GET", path: "/api/v1/namespaces/default/pods/web-0/portforward",
		header: upgradeHeader("SPDY/3.1+portforward.k8s.io"), status: 400, line: "invalid WebSocket handshake"},
	{name: "a page of another site", method: "GET", path: execPath, header: upgradeHeader("v5.channel.k8s.io",
		"Sec-Websocket-Key", "dGhlIHNhbXBsZSBub25jZQ==", "Origin", "https://evil.example"), status: 403, line: "refused: Origin https://evil.example"},
	{name: "no user to act as", token: "anonymous-token", method: "POST", path: execPath,
		header: upgradeHeader("spdy", "X-Stream-Protocol-Version", "v4.channel.k8s.io"), status: 403, line: "refused: this credential has no user"},
	{name: "policy", method: "POST", path: "/api/v1/namespaces/default/pods/db-0/exec?command=cat&stdout=true",
		header: upgradeHeader("spdy", "X-Stream-Protocol-Version", "v4.channel.k8s.io"), status: 403, line: "refused: the gateway's policy does not allow"},
	{name: "the cluster's RBAC", method: "POST", path: "/api/v1/namespaces/kube-system/pods/web-0/exec?command=cat&stdout=true",
		header: upgradeHeader("spdy", "X-Stream-Protocol-Version", "v4.channel.k8s.io"), status: 403, line: "upstream refused the upgrade"},
	{name: "the cluster's RBAC, proxied", method: "GET", path: "/api/v1/namespaces/kube-system/pods/web-0", status: 403,
		line: "the cluster refused a proxied request"},
	{name: "unknown resume token", method: "GET", path: execPath,
		header: upgradeHeader(mux.Subprotocol, "X-Stream-Protocol-Version", "v4.channel.k8s.io", "Sec-Websocket-Key", "dGhlIHNhbXBsZSBub25jZQ==",
			mux.HeaderResumeToken, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), status: 404, line: "resume refused"},
	{name: "dial rate", token: "limited-token", method: "POST", path: execPath,
		header: upgradeHeader("spdy", "X-Stream-Protocol-Version", "v4.channel.k8s.io"), status: 429, line: "over the caller's limit"},
}

// TestRefusalsNameTheCaller: every refusal of an authenticated caller
// writes a log line that names the caller (caller=token#N and the user),
// whatever refused it: the gateway's checks, the upgrade itself, the
// policy, the cluster, the resume registry or a limit.
func TestRefusalsNameTheCaller(t *testing.T) {
	toks, err := auth.ParseTokens("tokens", []byte("alice-token,alice\nanonymous-token\nlimited-token,lim\n"))
	if err != nil {
		t.Fatal(err)
	}
	policy, err := ParsePolicy([]byte("rules:\n- users: [alice, lim]\n  pods: [\"web-*\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{"alice-token": "caller=token#1 user=alice", "anonymous-token": `caller=token#2 user=""`, "limited-token": "caller=token#3 user=lim"}
	for _, tc := range refusalCases {
		t.Run(tc.name, func(t *testing.T) {
			cl := clustertest.Start(t)
			cl.SetRBAC(map[string][]string{"alice": {"default"}, "lim": {"default"}})
			var logs testnet.Buffer
			ps := &PolicyStore{}
			ps.Set(policy)
			g, err := New(Config{
				Auth: auth.NewWithUsers(toks, nil), Impersonate: true, Policy: ps, Cluster: cl.RestConfig(),
				ResumeTimeout: time.Minute, Limits: ops.Limits{DialsPerSecond: 0.001, DialBurst: 1},
				Logger: slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testnet.LogWriter{T: t}), nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			srv := serveGateway(t, g)
			token := tc.token
			if token == "" {
				token = "alice-token"
			}
			if tc.status == http.StatusTooManyRequests {
				g.lim.AllowDial("token#3") // spends the burst
			}
			status := refuse(t, srv, tc, token)
			if status != tc.status {
				t.Fatalf("status %d, want %d", status, tc.status)
			}
			logs.Await(t, tc.line, 10*time.Second)
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, tc.line) && !strings.Contains(l, ids[token]) {
					t.Errorf("the refusal's line does not name the caller (%s):\n%s", ids[token], l)
				}
				if (strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR")) && !strings.Contains(l, "caller=") {
					t.Errorf("a warning without the caller:\n%s", l)
				}
			}
		})
	}
}

// refuse sends tc's request with token and returns the status.
func refuse(t *testing.T, srv *httptest.Server, tc refusal, token string) int {
	t.Helper()
	req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range tc.header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+token)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	return resp.StatusCode
}
