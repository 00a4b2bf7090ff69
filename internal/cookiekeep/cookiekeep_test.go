package cookiekeep

import (
	"net/http"
	"testing"
)

func TestJar(t *testing.T) {
	set := func(v ...string) http.Header { return http.Header{"Set-Cookie": v} }
	for _, tc := range []struct {
		name    string
		answers []http.Header // 101s, in order
		own     string        // the caller's Cookie header
		want    string        // Cookie sent with the next upgrade ("" : none)
	}{
		{"nothing set: own cookies as they are", []http.Header{{}}, "a=1", "a=1"},
		{"kept after own", []http.Header{set("replica=gw-0; Path=/; HttpOnly")}, "a=1", "a=1; replica=gw-0"},
		{"set again: the new value", []http.Header{set("replica=gw-0"), set("replica=gw-1")}, "", "replica=gw-1"},
		{"two answers add up", []http.Header{set("AWSALB=x"), set("replica=gw-0")}, "", "AWSALB=x; replica=gw-0"},
		{"a server cookie replaces an own one of its name", []http.Header{set("replica=gw-2")}, "replica=old; a=1", "a=1; replica=gw-2"},
		{"deleted (Max-Age=0)", []http.Header{set("replica=gw-0"), set("replica=; Max-Age=0")}, "", ""},
		{"deleted, own ones stay", []http.Header{set("replica=gw-0"), set("replica=; Max-Age=0")}, "a=1", "a=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var j Jar
			h := http.Header{}
			if tc.own != "" {
				h.Set("Cookie", tc.own)
			}
			for _, a := range tc.answers {
				j.Keep(a)
				j.Apply(h) // the same map again: Apply is the same whether h is fresh or was applied before
			}
			if got := h.Get("Cookie"); got != tc.want {
				t.Errorf("Cookie %q, want %q", got, tc.want)
			}
		})
	}
}
