package bridge_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/wsmux/wsmux/adapters/bridge"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// TestUpstreamRefusalPassedOn: an upstream that refuses the upgrade with
// an apiserver's metav1.Status (403, JSON) is answered downstream with the
// same status, Content-Type and body, so a client decodes the cluster's
// own refusal; a plain-text refusal keeps its status and message.
func TestUpstreamRefusalPassedOn(t *testing.T) {
	const status = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"web-1\" is forbidden: User \"bob\" cannot create resource \"pods/exec\" in API group \"\" in the namespace \"a\"","reason":"Forbidden","details":{"name":"web-1","kind":"pods"},"code":403}`
	for _, c := range []struct {
		name, ctype, body string
		wantBody          string // "": contains wantText
		wantText          string
	}{
		{"status", "application/json", status, status, ""},
		{"text", "text/plain; charset=utf-8", "no entry\n", "", "no entry"},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", c.ctype)
				w.WriteHeader(http.StatusForbidden)
				_, _ = io.WriteString(w, c.body)
			}))
			defer up.Close()
			base, _ := url.Parse(up.URL)
			h := &bridge.Handler{Upgrader: spdy.NewResponseUpgrader(), Dial: bridge.SPDYUpstream(base, nil)}
			front := httptest.NewServer(h)
			defer front.Close()
			req, _ := http.NewRequest(http.MethodPost, front.URL+"/api/v1/namespaces/a/pods/web-1/exec", nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "SPDY/3.1")
			req.Header.Set(k8shttpstream.HeaderProtocolVersion, proto)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("status %d, want 403 (body %q)", resp.StatusCode, got)
			}
			if c.wantBody != "" {
				if string(got) != c.wantBody || resp.Header.Get("Content-Type") != c.ctype {
					t.Fatalf("got %q (%s), want the upstream's Status as it was (%s)", got, resp.Header.Get("Content-Type"), c.ctype)
				}
				return
			}
			if !strings.Contains(string(got), c.wantText) {
				t.Fatalf("got %q, want it to carry %q", got, c.wantText)
			}
		})
	}
}
