package origin

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	p, err := Parse([]string{"https://Console.Example.com/", " http://10.0.0.1:8080", "https://app.example:443", "https://[::1]:8443", ""})
	if err != nil {
		t.Fatal(err)
	}
	want := "http://10.0.0.1:8080 https://[::1]:8443 https://app.example https://console.example.com"
	if got := strings.Join(p.Allowed(), " "); got != want {
		t.Errorf("allowed %q, want %q", got, want)
	}
	for _, bad := range []string{"null", "*", "console.example.com", "ftp://x.example", "https://x.example/path", "https://x.example?q",
		"https://user@x.example", "https://x.example:0", "https://x.example:99999", "https://x.example:", "https://", "https://x.example//"} {
		if _, err := Parse([]string{bad}); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		} else if !strings.Contains(err.Error(), bad) {
			t.Errorf("Parse(%q): %v does not name it", bad, err)
		}
	}
}

// TestCheck: no Origin passes (not a browser), the server's own origin
// passes whatever the case or an explicit default port, and so do the
// allowed ones; an origin that differs in scheme, host or port, null, a
// malformed one and two Origin headers are refused, saying why.
func TestCheck(t *testing.T) {
	p, err := Parse([]string{"https://console.example"})
	if err != nil {
		t.Fatal(err)
	}
	type req struct {
		host  string
		tls   bool
		proto string // X-Forwarded-Proto
	}
	gw := req{host: "gw.example:8443", tls: true}
	plain := req{host: "gw.example"}
	behindTLSProxy := req{host: "gw.example", proto: "https"}
	for _, tc := range []struct {
		name   string
		r      req
		origin []string
		ok     bool
	}{
		{"no Origin", gw, nil, true},
		{"own", gw, []string{"https://gw.example:8443"}, true},
		{"own, upper case", gw, []string{"HTTPS://GW.Example:8443"}, true},
		{"own, plain HTTP, default port", plain, []string{"http://gw.example"}, true},
		{"own, plain HTTP, explicit default port", plain, []string{"http://gw.example:80"}, true},
		{"own, behind a proxy that ended TLS", behindTLSProxy, []string{"https://gw.example"}, true},
		{"allowed", gw, []string{"https://console.example"}, true},
		{"allowed, explicit default port", gw, []string{"https://console.example:443"}, true},
		{"another site", gw, []string{"https://evil.example"}, false},
		{"another port", gw, []string{"https://gw.example:9443"}, false},
		{"another scheme", gw, []string{"http://gw.example:8443"}, false},
		{"plain HTTP page, TLS server", req{host: "gw.example", tls: true}, []string{"http://gw.example"}, false},
		{"TLS page, plain server", plain, []string{"https://gw.example"}, false},
		{"allowed host, another scheme", gw, []string{"http://console.example"}, false},
		{"allowed host, another port", gw, []string{"https://console.example:8443"}, false},
		{"a subdomain of the allowed", gw, []string{"https://a.console.example"}, false},
		{"null", gw, []string{"null"}, false},
		{"with a path", gw, []string{"https://gw.example:8443/"}, false},
		{"not a URL", gw, []string{"gw.example:8443"}, false},
		{"two headers", gw, []string{"https://gw.example:8443", "https://evil.example"}, false},
		{"no Host", req{}, []string{"http://"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Host = tc.r.host
			if !tc.r.tls {
				r.TLS = nil
			} else {
				r.TLS = &tls.ConnectionState{}
			}
			if tc.r.proto != "" {
				r.Header.Set("X-Forwarded-Proto", tc.r.proto)
			}
			r.Header["Origin"] = tc.origin
			err := p.Check(r)
			if tc.ok != (err == nil) {
				t.Fatalf("Check: %v, want ok %v", err, tc.ok)
			}
			if err != nil && (!strings.Contains(err.Error(), tc.origin[0]) || err.Why == "") {
				t.Errorf("%q does not name the origin and say why", err)
			}
		})
	}
	var none *Policy
	r := httptest.NewRequest(http.MethodGet, "https://gw.example/", nil)
	r.Header.Set("Origin", "https://gw.example")
	if err := none.Check(r); err != nil {
		t.Errorf("nil policy refused the own origin: %v", err)
	}
	r.Header.Set("Origin", "https://console.example")
	if err := none.Check(r); err == nil {
		t.Error("nil policy allowed another origin")
	}
}
