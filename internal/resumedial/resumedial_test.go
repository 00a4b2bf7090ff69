package resumedial

import (
	"net/http"
	"testing"
)

// TestKeepCookies: the cookies of each 101 go into Header's Cookie (after
// the caller's own), a cookie set again replaces its value and one deleted
// goes.
func TestKeepCookies(t *testing.T) {
	w := &Watcher{Header: http.Header{"Cookie": {"own=1"}}}
	steps := []struct {
		set  []string
		want string
	}{
		{nil, "own=1"},
		{[]string{"wsmux-replica=a; Path=/; HttpOnly"}, "own=1; wsmux-replica=a"},
		{[]string{"AWSALB=xyz", "wsmux-replica=b"}, "own=1; AWSALB=xyz; wsmux-replica=b"},
		{[]string{"AWSALB=; Max-Age=0"}, "own=1; wsmux-replica=b"},
	}
	for i, s := range steps {
		w.answer(&http.Response{StatusCode: http.StatusSwitchingProtocols, Header: http.Header{"Set-Cookie": s.set}}, false, 0)
		if got := w.Header.Get("Cookie"); got != s.want {
			t.Errorf("step %d: Cookie %q, want %q", i, got, s.want)
		}
	}
}

func TestEventFinal(t *testing.T) {
	for _, tc := range []struct {
		e     Event
		final bool
	}{
		{Event{Kind: Refused, Status: 404}, true},
		{Event{Kind: Refused, Status: 403}, true},
		{Event{Kind: Refused, Status: 409}, true},
		{Event{Kind: Refused, Status: 429}, false},
		{Event{Kind: Refused, Status: 503}, false},
		{Event{Kind: Lost}, false},
		{Event{Kind: DialFailed}, false},
	} {
		if got := tc.e.Final(); got != tc.final {
			t.Errorf("%+v: Final %v, want %v", tc.e, got, tc.final)
		}
	}
}

func TestNewURL(t *testing.T) {
	for _, tc := range []struct{ in, url, addr string }{
		{"https://gw.example:8443/api?x=1", "ws://gw.example:8443/api?x=1", "gw.example:8443"},
		{"wss://gw.example/t", "ws://gw.example/t", "gw.example:443"},
		{"http://[::1]/t", "ws://[::1]/t", "[::1]:80"},
	} {
		w, err := New(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if w.URL() != tc.url || w.Addr() != tc.addr {
			t.Errorf("%s: URL %s addr %s, want %s %s", tc.in, w.URL(), w.Addr(), tc.url, tc.addr)
		}
	}
	if _, err := New("ftp://h/"); err == nil {
		t.Error("ftp:// accepted")
	}
}
