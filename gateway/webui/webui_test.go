package webui_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wsmux/wsmux/gateway/webui"
)

func TestServesTheTerminal(t *testing.T) {
	srv := httptest.NewServer(webui.Wrap(http.NotFoundHandler()))
	defer srv.Close()
	for _, tc := range []struct{ path, ctype, contains string }{
		{"/ui/", "text/html", `<script type="module" src="app.js">`},
		{"/ui/app.js", "text/javascript", "xterm"},
		{"/ui/app.css", "text/css", ".xterm"},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) || !strings.Contains(string(b), tc.contains) {
			t.Errorf("GET %s: %d %s, %d bytes", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
	}
	resp, err := http.Post(srv.URL+"/ui/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/: %d, want 405", resp.StatusCode)
	}
}

// TestBrowserSubprotocolsBecomeHeaders: what a browser cannot send as headers
// on a WebSocket upgrade reaches the gateway as headers; other requests pass
// unchanged.
func TestBrowserSubprotocolsBecomeHeaders(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(webui.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() })))
	defer srv.Close()
	for _, tc := range []struct {
		name                         string
		header                       http.Header
		wantProto, wantAuth, wantVer string
	}{
		{"browser", http.Header{"Sec-Websocket-Protocol": {"wsmux.v1, x-stream-protocol-version.v4.channel.k8s.io, base64url.bearer.authorization.k8s.io.c2VjcmV0LXRva2Vu"}},
			"wsmux.v1", "Bearer secret-token", "v4.channel.k8s.io"},
		{"an Authorization header wins", http.Header{"Authorization": {"Bearer mine"}, "Sec-Websocket-Protocol": {"wsmux.v1", "base64url.bearer.authorization.k8s.io.eA"}},
			"wsmux.v1", "Bearer mine", ""},
		{"v5 from a browser: the token only", http.Header{"Sec-Websocket-Protocol": {"v5.channel.k8s.io, base64url.bearer.authorization.k8s.io.eA, x-stream-protocol-version.v4.channel.k8s.io"}},
			"v5.channel.k8s.io, x-stream-protocol-version.v4.channel.k8s.io", "Bearer x", ""},
		{"no token subprotocol: unchanged", http.Header{"Sec-Websocket-Protocol": {"v5.channel.k8s.io, x-stream-protocol-version.v4.channel.k8s.io"}},
			"v5.channel.k8s.io, x-stream-protocol-version.v4.channel.k8s.io", "", ""},
		{"two tokens: unchanged, for the gateway to refuse as ambiguous", http.Header{"Sec-Websocket-Protocol": {"wsmux.v1, base64url.bearer.authorization.k8s.io.eA, base64url.bearer.authorization.k8s.io.eQ"}},
			"wsmux.v1, base64url.bearer.authorization.k8s.io.eA, base64url.bearer.authorization.k8s.io.eQ", "", ""},
		{"kubectl: unchanged", http.Header{"Sec-Websocket-Protocol": {"wsmux.v1"}, "Authorization": {"Bearer k"}, "X-Stream-Protocol-Version": {"v5.channel.k8s.io"}},
			"wsmux.v1", "Bearer k", "v5.channel.k8s.io"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+"/api/v1/namespaces/default/pods/shell/exec", nil)
			req.Header = tc.header
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if p := strings.Join(got.Values("Sec-Websocket-Protocol"), ", "); p != tc.wantProto {
				t.Errorf("Sec-WebSocket-Protocol %q, want %q", p, tc.wantProto)
			}
			if a := got.Get("Authorization"); a != tc.wantAuth {
				t.Errorf("Authorization %q, want %q", a, tc.wantAuth)
			}
			if v := got.Get("X-Stream-Protocol-Version"); v != tc.wantVer {
				t.Errorf("X-Stream-Protocol-Version %q, want %q", v, tc.wantVer)
			}
		})
	}
}
