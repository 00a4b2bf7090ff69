package mux

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/internal/testnet"
	"github.com/wsmux/wsmux/internal/wshandshake"
)

// promptly bounds how long a session that may not be suspended may take
// to end: far below the resume timeouts of these tests (an hour), so a
// session that was suspended instead fails the test rather than passing
// late.
const promptly = 10 * time.Second

// TestResumeNotBeforeSettings: a server with resumption on (an hour's
// resume timeout) and a client that upgrades, gets its 101 and resume
// token, and drops before its SETTINGS could set RESUME: the server's
// session ends at once with ErrResumeNotNegotiated, leaves its registry
// and AcceptStream returns; it is not suspended for the resume timeout.
// The same for a client whose SETTINGS did not set RESUME and one cut
// halfway through its SETTINGS. One whose SETTINGS set RESUME is
// suspended, as before.
func TestResumeNotBeforeSettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		send    func(t testing.TB) []byte // what the client sends before it drops
		suspend bool
		wrapped bool // the session's error wraps ErrResumeNotNegotiated
	}{
		{name: "dropped after the 101", send: func(testing.TB) []byte { return nil }, wrapped: true},
		{name: "dropped inside its SETTINGS", send: func(t testing.TB) []byte {
			m := testnet.SettingsMessage(t, true)
			return m[:len(m)/2]
		}, wrapped: true},
		{name: "SETTINGS without RESUME", send: func(t testing.TB) []byte { return testnet.SettingsMessage(t, false) }},
		{name: "SETTINGS with RESUME", send: func(t testing.TB) []byte { return testnet.SettingsMessage(t, true) }, suspend: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := newResumeServer(t, &ResumeRegistry{}, func(c *Config) { c.ResumeTimeout = time.Hour })
			conn, _, hdr, err := wshandshake.Dial(context.Background(), "ws://"+rs.host()+"/", wshandshake.DialOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if hdr.Get(HeaderResumeToken) == "" {
				t.Fatal("no resume token in the 101")
			}
			ss := <-rs.sessions
			t.Cleanup(func() { _ = ss.Close() })
			accepted := make(chan error, 1)
			go func() {
				_, err := ss.AcceptStream(context.Background())
				accepted <- err
			}()
			if b := tc.send(t); len(b) > 0 {
				if _, err := conn.Write(b); err != nil {
					t.Fatal(err)
				}
			}
			// The server must have read what was sent before it sees
			// the drop: a graceful TCP close keeps the order.
			_ = conn.Close()
			if tc.suspend {
				rs.waitSuspended(t, 1)
				if err := ss.Err(); err != nil {
					t.Fatalf("suspended session ended: %v", err)
				}
				return
			}
			select {
			case <-ss.Done():
			case <-time.After(promptly):
				t.Fatalf("the session did not end within %v (suspended: %v, registry: %d suspended)",
					promptly, ss.Suspended(), rs.reg.Suspended())
			}
			select {
			case err := <-accepted:
				if !errors.Is(err, ErrSessionClosed) {
					t.Errorf("AcceptStream: %v, want the session's end", err)
				}
			case <-time.After(promptly):
				t.Error("AcceptStream still waiting after the session ended")
			}
			err = ss.Err()
			var se *SessionError
			if !errors.As(err, &se) || se.Code != frame.InternalError {
				t.Errorf("session ended with %v, want INTERNAL_ERROR (a lost connection)", err)
			}
			if got := errors.Is(err, ErrResumeNotNegotiated); got != tc.wrapped {
				t.Errorf("session ended with %v: wraps ErrResumeNotNegotiated %v, want %v", err, got, tc.wrapped)
			}
			if st := ss.Stats(); st.Suspends != 0 {
				t.Errorf("%d suspensions", st.Suspends)
			}
			if n, s := rs.reg.Len(), rs.reg.Suspended(); n != 0 || s != 0 {
				t.Errorf("registry: %d sessions, %d suspended; want none", n, s)
			}
		})
	}
}

// TestResumeClientNotBeforeSettings: a client with resumption on whose
// connection drops after the 101 (with its resume token) but before the
// server's SETTINGS arrived ends at once with ErrResumeNotNegotiated: the
// server cannot have agreed to keep the session, so the client does not
// redial (a resume would at best get 404), whatever its resume timeout.
func TestResumeClientNotBeforeSettings(t *testing.T) {
	var upgrades, resumes atomic.Int32
	redialled := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(HeaderResumeToken) != "" {
			resumes.Add(1)
			notify(redialled)
			http.Error(w, "try again", http.StatusServiceUnavailable) // would be retried
			return
		}
		upgrades.Add(1)
		conn, _, err := wshandshake.Upgrade(w, r, http.Header{HeaderResumeToken: {"tok"}})
		if err == nil {
			_ = conn.Close() // before any SETTINGS
		}
	}))
	defer srv.Close()
	c := dialResume(t, "ws://"+strings.TrimPrefix(srv.URL, "http://")+"/", "", func(c *Config) { c.ResumeTimeout = time.Hour })
	select {
	case <-c.Done():
	case <-redialled:
		t.Fatal("the client redialled a session the server never agreed to resume")
	case <-time.After(promptly):
		t.Fatalf("the client's session did not end within %v (suspended: %v)", promptly, c.Suspended())
	}
	err := c.Err()
	if !errors.Is(err, ErrResumeNotNegotiated) {
		t.Errorf("client ended with %v, want ErrResumeNotNegotiated", err)
	}
	if st := c.Stats(); st.Suspends != 0 || st.ResumeFailures != 0 {
		t.Errorf("stats: %d suspensions, %d resume failures; want none", st.Suspends, st.ResumeFailures)
	}
	if u, r := upgrades.Load(), resumes.Load(); u != 1 || r != 0 {
		t.Errorf("server saw %d upgrades and %d resumes, want 1 and 0", u, r)
	}
}
