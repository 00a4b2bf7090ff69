package controller

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseHandoffMessage(t *testing.T) {
	for _, tc := range []struct{ msg, reason, text string }{
		{`{"v":1,"user":{"name":"alice","groups":["dev"]},"target":{"namespace":"default","pod":"web-0","subresource":"exec","command":["sh"],"tty":true},"data":"R0VUIC8gSFRUUC8xLjENCg0K","remote_addr":"1.2.3.4:5"}`, "", ""},
		{`{"v":1,"user":{"name":"a"},"target":{"namespace":"n","pod":"p","subresource":"portforward"}}`, "", ""},
		{`{"v":1,"user":{"name":"a"},"target":{"namespace":"n","pod":"p","subresource":"attach"},"data":"FgMBAgA="}`, HandoffTLS, "TLS"},
		{`{"v":2}`, HandoffBadMessage, "version 2"},
		{`{`, HandoffBadMessage, "not a handoff message"},
		{`{"v":1,"admin":true}`, HandoffBadMessage, "unknown field"},
		{`{"v":1,"user":{"name":"a"},"target":{"namespace":"n","pod":"p","subresource":"exec"}}`, HandoffBadMessage, "without a command"},
		{`{"v":1,"user":{"name":"a"},"target":{"namespace":"n","pod":"P","subresource":"attach"}}`, HandoffBadMessage, "Kubernetes name"},
		{`{"v":1,"user":{},"target":{"namespace":"n","pod":"p","subresource":"attach"}}`, HandoffBadMessage, "no user"},
		{`{"v":1,"user":{"name":"a"},"target":{"namespace":"n","pod":"p","subresource":"attach"}} {}`, HandoffBadMessage, "data after"},
	} {
		_, reason, err := ParseHandoffMessage([]byte(tc.msg))
		if reason != tc.reason || (err == nil) != (tc.reason == "") || err != nil && !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %q %v, want %q %q", tc.msg, reason, err, tc.reason, tc.text)
		}
	}
}

// FuzzParseHandoffMessage: any bytes are a valid message or refused with
// a reason, never a panic.
func FuzzParseHandoffMessage(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"user":{"name":"alice","groups":["dev"]},"target":{"namespace":"default","pod":"web-0","subresource":"exec","command":["sh"],"tty":true},"data":"R0VUIC8gSFRUUC8xLjENCg0K","remote_addr":"1.2.3.4:5"}`,
		`{"v":1,"user":{"name":"a"},"target":{"namespace":"n","pod":"p","subresource":"portforward"},"data":"FgMB"}`,
		`{"v":2}`, `{`, `{"v":1,"x":1}`, `null`, `[]`, `{"v":1}{"v":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, reason, err := ParseHandoffMessage(b)
		if err == nil && (reason != "" || m.V != 1 || m.User.Name == "" || m.Target.Validate() != nil) {
			t.Fatalf("accepted %q as %+v", b, m)
		}
		if err != nil && reason != HandoffBadMessage && reason != HandoffTLS {
			t.Fatalf("%q: reason %q", b, reason)
		}
	})
}

// TestParsePodPath: the one parser of the pod subresource paths takes
// valid Kubernetes names only, and nothing around the path.
func TestParsePodPath(t *testing.T) {
	if tg, ok := ParsePodPath("/api/v1/namespaces/kube-system/pods/coredns-5d78c9869d-abcde/portforward"); !ok ||
		tg.Namespace != "kube-system" || tg.Pod != "coredns-5d78c9869d-abcde" || tg.Subresource != "portforward" {
		t.Fatal(tg, ok)
	}
	for _, p := range []string{
		"/", "/api/v1/namespaces//pods/x/exec", "/api/v1/namespaces/a/pods/x/exec/",
		"/api/v1/namespaces/a/pods/X/exec", "/api/v1/namespaces/a/pods/x/proxy",
		"/api/v1/namespaces/default/pods/../../secrets/exec", "/api/v1/namespaces/a/pods/x%2Fy/exec",
		"/api/v1/namespaces/" + strings.Repeat("a", 64) + "/pods/x/exec",
	} {
		if _, ok := ParsePodPath(p); ok {
			t.Errorf("ParsePodPath(%q) accepted", p)
		}
		r := httptest.NewRequest(http.MethodPost, "http://gw"+strings.ReplaceAll(p, "%2F", "_"), nil)
		r.URL.Path = p
		if _, ok := TargetFromRequest(r); ok {
			t.Errorf("TargetFromRequest(%q) accepted", p)
		}
	}
}
