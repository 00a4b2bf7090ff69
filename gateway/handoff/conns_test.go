//go:build linux

package handoff

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/wsmux/wsmux/controller"
)

// TestHandoffConnectionCap: with MaxConns 1, a second handoff while the
// first connection is open is refused (too_many_connections, counted) and
// its socket closed; once the first has ended, the next is accepted.
// Before, handed-off connections were not bounded at all.
func TestHandoffConnectionCap(t *testing.T) {
	e := start(t, func(c *Config) { c.MaxConns = 1 })
	msg := func(data string) controller.HandoffMessage {
		return controller.HandoffMessage{User: controller.User{Name: "alice"},
			Target: controller.Target{Namespace: "default", Pod: "web-0", Subresource: "attach"}, Data: []byte(data)}
	}
	first, srv := tcpPair(t)
	err := controller.Handoff(context.Background(), e.s.Addr(), srv, msg("GET / HTTP/1.1\r\nHost: x\r\n")) // the head unfinished: it stays open
	srv.Close()
	if err != nil {
		t.Fatal(err)
	}
	second, srv2 := tcpPair(t)
	err = controller.Handoff(context.Background(), e.s.Addr(), srv2, msg("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	srv2.Close()
	var he *controller.HandoffError
	if !errors.As(err, &he) || he.Reason != ResultTooManyConns {
		t.Fatalf("second handoff: %v, want %s", err, ResultTooManyConns)
	}
	expectEOF(t, second)
	e.metric(t, `wsmux_handoffs_total{result="too_many_connections"} 1`, `wsmux_connections_refused_total{listener="handoff"} 1`,
		`wsmux_connections_open{listener="handoff"} 1`)

	// The first finishes its head: the gateway answers (400: no upgrade)
	// and closes it, which returns its slot.
	if _, err := first.Write([]byte("\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(first), nil)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("first: %v %v", resp, err)
	}
	resp.Body.Close()
	expectEOF(t, first)
	third, srv3 := tcpPair(t)
	defer third.Close()
	err = controller.Handoff(context.Background(), e.s.Addr(), srv3, msg("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	srv3.Close()
	if err != nil {
		t.Fatalf("third handoff, after the first ended: %v", err)
	}
	expectEOF(t, third)
}
