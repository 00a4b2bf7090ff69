package tunnel

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/internal/testnet"
	"github.com/wsmux/wsmux/mux"
)

// closedPort returns a loopback HOST:PORT nothing listens on.
func closedPort(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestRefusalsNameTheCaller: every refusal of an authenticated caller, of
// its upgrade or of one of its streams, writes a log line naming it
// (caller=token#1).
func TestRefusalsNameTheCaller(t *testing.T) {
	echo, closed := echoServer(t), closedPort(t)
	bearer := http.Header{"Authorization": {"Bearer " + testToken}}
	// stream opens a session and one stream to target; it returns the
	// stream's error.
	stream := func(target string) func(t *testing.T, url string) {
		return func(t *testing.T, url string) {
			s, err := (&mux.Dialer{Header: bearer}).Dial(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			_, err = s.Open(context.Background(), http.Header{TargetHeader: {target}})
			var se *mux.StreamError
			if !errors.As(err, &se) {
				t.Fatalf("stream to %q: %v, want it refused", target, err)
			}
		}
	}
	// request sends a plain HTTP request to the upgrade path and wants
	// status.
	request := func(h http.Header, status int) func(t *testing.T, url string) {
		return func(t *testing.T, url string) {
			req, _ := http.NewRequest(http.MethodGet, "http"+strings.TrimPrefix(url, "ws"), nil)
			for k, v := range h {
				req.Header[k] = v
			}
			req.Header.Set("Authorization", "Bearer "+testToken)
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != status {
				t.Fatalf("status %d, want %d", resp.StatusCode, status)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		limits ops.Limits
		do     func(t *testing.T, url string)
		line   string
	}{
		{"not an upgrade", ops.Limits{}, request(nil, http.StatusBadRequest), "upgrade failed"},
		{"a handshake without a key", ops.Limits{}, request(http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"},
			"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Protocol": {mux.Subprotocol}}, http.StatusBadRequest), "upgrade failed"},
		{"a bad target", ops.Limits{}, stream("no-port"), "refused stream with a bad target"},
		{"a target not allowed", ops.Limits{}, stream("127.0.0.1:1"), "refused target not on the allow list"},
		{"a target that refuses", ops.Limits{}, stream(closed), "target dial failed"},
		{"the dial rate", ops.Limits{DialsPerSecond: 0.001, DialBurst: 1}, func(t *testing.T, url string) {
			s, err := (&mux.Dialer{Header: bearer}).Dial(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Open(context.Background(), http.Header{TargetHeader: {echo}}); err != nil {
				t.Fatal(err)
			}
			stream(echo)(t, url)
		}, "refused a dial over the caller's rate"},
		{"a page of another site", ops.Limits{}, request(http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"},
			"Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}, "Sec-Websocket-Protocol": {mux.Subprotocol}, "Origin": {"https://evil.example"}},
			http.StatusForbidden), "refused: Origin https://evil.example"},
		{"an unknown resume token", ops.Limits{}, request(http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"},
			"Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}, "Sec-Websocket-Protocol": {mux.Subprotocol},
			mux.HeaderResumeToken: {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}, http.StatusNotFound), "resume refused"},
		{"the sessions", ops.Limits{SessionsPerCaller: 1}, func(t *testing.T, url string) {
			s, err := (&mux.Dialer{Header: bearer}).Dial(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			request(http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"},
				"Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}, "Sec-Websocket-Protocol": {mux.Subprotocol}}, http.StatusTooManyRequests)(t, url)
		}, "refused a session over the caller's limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs testnet.Buffer
			srv, err := NewServer(ServerConfig{
				Allow: []string{echo, closed}, Auth: auth.New([]string{testToken}, nil), Limits: tc.limits, ResumeTimeout: time.Minute,
				Logger: slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testnet.LogWriter{T: t}), nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(srv.Handler())
			defer func() {
				hs.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				srv.Metrics().Sessions.Drain(ctx)
				srv.Wait()
			}()
			tc.do(t, wsURL(t, hs.URL))
			logs.Await(t, tc.line, 10*time.Second)
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, tc.line) && !strings.Contains(l, "caller=token#1") {
					t.Errorf("the refusal's line does not name the caller:\n%s", l)
				}
				if strings.Contains(l, "level=WARN") && !strings.Contains(l, "caller=") {
					t.Errorf("a warning without the caller:\n%s", l)
				}
			}
		})
	}
}
