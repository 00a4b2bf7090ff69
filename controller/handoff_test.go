package controller

import (
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
