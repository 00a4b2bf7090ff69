package httpstream_test

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientspdy "k8s.io/client-go/transport/spdy"
)

// TestRoundTripperFor: one call from a *rest.Config gives a pair that
// verifies the server with the config's CA, goes through its proxy, and
// authenticates as client-go would: a bearer token, or a token from an
// exec credential plugin.
func TestRoundTripperFor(t *testing.T) {
	const plugin = `printf '%s' '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-plugin"}}'`
	for _, tc := range []struct {
		name  string
		token string
		setup func(*rest.Config)
	}{
		{"bearer token", "static-token", func(c *rest.Config) { c.BearerToken = "static-token" }},
		{"exec plugin", "from-plugin", func(c *rest.Config) {
			c.ExecProvider = &clientcmdapi.ExecConfig{
				APIVersion: "client.authentication.k8s.io/v1", Command: "sh", Args: []string{"-c", plugin},
				InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			echo := echoHandler(t)
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer "+tc.token {
					http.Error(w, "unauthorized", http.StatusUnauthorized)
					return
				}
				echo.ServeHTTP(w, r)
			}))
			defer srv.Close()
			pu, proxied := connectProxy(t)
			cfg := &rest.Config{
				Host:            srv.URL,
				TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})},
				Proxy:           func(*http.Request) (*url.URL, error) { return pu, nil },
			}
			tc.setup(cfg)
			rt, up, err := wsmuxhttpstream.RoundTripperFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/exec", nil)
			conn, proto, err := clientspdy.Negotiate(up, &http.Client{Transport: rt}, req, testProtocol)
			if err != nil {
				t.Fatalf("Negotiate: %v", err)
			}
			defer conn.Close()
			if proto != testProtocol {
				t.Fatalf("protocol %q", proto)
			}
			s, err := conn.CreateStream(http.Header{"Streamtype": {"data"}})
			if err != nil {
				t.Fatal(err)
			}
			_, _ = s.Write([]byte("through the proxy"))
			_ = s.Close()
			if b, err := io.ReadAll(s); err != nil || string(b) != "through the proxy" {
				t.Fatalf("echo %q, %v", b, err)
			}
			if proxied.Load() != 1 {
				t.Fatalf("the proxy tunnelled %d connections, want 1", proxied.Load())
			}
		})
	}
	if _, _, err := wsmuxhttpstream.RoundTripperFor(nil); err == nil {
		t.Fatal("nil config accepted")
	}
}
