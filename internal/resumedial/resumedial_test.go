package resumedial

import (
	"testing"
)

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
