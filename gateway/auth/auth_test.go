package auth

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/controller"
)

func TestReadTokens(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tokens")
	os.WriteFile(p, []byte("# ops team\n  alpha  \n\nbeta\n"), 0o600)
	got, err := ReadTokens(p)
	if err != nil || strings.Join(got, ",") != "alpha,beta" {
		t.Fatalf("%q %v", got, err)
	}
	if tok, _ := ReadToken(p); tok != "alpha" {
		t.Fatalf("first token %q", tok)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("# nothing\n\n"), 0o600)
	if _, err := ReadTokens(empty); err == nil {
		t.Fatal("empty token file accepted")
	}
	if _, err := ReadTokens(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file accepted")
	}
}

func TestAuthenticate(t *testing.T) {
	a := New([]string{"alpha", "beta"}, nil)
	for _, tc := range []struct {
		header, reason string
	}{
		{"Bearer alpha", ""},
		{"bearer beta", ""},
		{"", ReasonMissing},
		{"Bearer alph", ReasonBadToken},
		{"Bearer alphaa", ReasonBadToken},
		{"Bearer ", ReasonBadRequest},
		{"Basic YWxwaGE6", ReasonBadRequest},
		{"alpha", ReasonBadRequest},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		_, err := a.Authenticate(r)
		var ae *Error
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("%q: %v", tc.header, err)
		case tc.reason != "" && (!errors.As(err, &ae) || ae.Reason != tc.reason):
			t.Errorf("%q: %v, want %s", tc.header, err, tc.reason)
		}
	}
	if _, err := (&Credentials{}).Authenticate(httptest.NewRequest(http.MethodGet, "/", nil)); err == nil {
		t.Error("zero Authenticator accepted a request")
	}
}

func TestReject(t *testing.T) {
	w := httptest.NewRecorder()
	Reject(w, &Error{Reason: ReasonBadToken, Detail: "invalid bearer token"})
	if w.Code != 401 || w.Header().Get("WWW-Authenticate") == "" || !strings.Contains(w.Body.String(), "invalid bearer token") {
		t.Fatalf("%d %q %q", w.Code, w.Header(), w.Body.String())
	}
}

func TestParseTokens(t *testing.T) {
	toks, err := ParseTokens("f", []byte("# c\nt1,alice,u1,\"a,b\"\n t2 , bob \nt3\n\nt4,carol,,ops\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Token{
		{"t1", controller.User{Name: "alice", UID: "u1", Groups: []string{"a", "b"}}},
		{"t2", controller.User{Name: "bob"}},
		{"t3", controller.User{}},
		{"t4", controller.User{Name: "carol", Groups: []string{"ops"}}},
	}
	if len(toks) != len(want) {
		t.Fatalf("%+v", toks)
	}
	for i := range want {
		g, w := toks[i], want[i]
		if g.Token != w.Token || g.User.Name != w.User.Name || g.User.UID != w.User.UID || strings.Join(g.User.Groups, "|") != strings.Join(w.User.Groups, "|") {
			t.Errorf("line %d: %+v, want %+v", i, g, w)
		}
	}
	for _, bad := range []string{"", "# only\n", "a,b,c,d,e\n", "t,\n", "t1,x\nt1,y\n", "\"unterminated\n"} {
		if _, err := ParseTokens("f", []byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	a := NewWithUsers(toks, nil)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer t4")
	u, err := a.Authenticate(r)
	if err != nil || u.ID != "token#4" || u.Name != "carol" || u.Groups[0] != "ops" {
		t.Fatalf("%+v %v", u, err)
	}
}

func TestFileReloaderKeepsStateOnError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte("good"), 0o600)
	var cur string
	r := &FileReloader{Path: p, What: "test file", Load: func(b []byte) error {
		if !strings.HasPrefix(string(b), "good") {
			return errors.New("bad content")
		}
		cur = string(b)
		return nil
	}}
	if err := r.Reload(); err != nil || cur != "good" {
		t.Fatal(cur, err)
	}
	os.WriteFile(p, []byte("bad"), 0o600)
	if err := r.Reload(); err == nil || cur != "good" {
		t.Fatalf("bad file: %v, state %q", err, cur)
	}
	os.WriteFile(p, []byte("good again"), 0o600)
	if err := r.Reload(); err != nil || cur != "good again" {
		t.Fatal(cur, err)
	}
}

// TestTokenFileWatchReloadsOnChange: the watch notices edits of the file on
// disk by their contents, including one that keeps its size and its
// modification time, and installs the new tokens; a broken edit keeps the
// old ones. Each step waits for the reload's outcome (OnReload).
func TestTokenFileWatchReloadsOnChange(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens")
	// Each version is written beside the file and renamed over it, as a
	// deployment does (and a Secret volume), so the watch never reads half
	// of one.
	write := func(content string, mtime time.Time) {
		t.Helper()
		tmp := p + ".new"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(tmp, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil {
			t.Fatal(err)
		}
	}
	stamp := time.Now().Add(-time.Hour).Truncate(time.Second)
	write("token-aaaa,alice\n", stamp)
	a := NewWithUsers(nil, nil)
	outcomes := make(chan error, 8)
	r := &TokenFileReloader{Path: p, Auth: a, OnReload: func(err error) { outcomes <- err }}
	next := func() error {
		t.Helper()
		select {
		case err := <-outcomes:
			return err
		case <-time.After(30 * time.Second): // a failure deadline, not a wait
			t.Fatal("the watch did not reload the edited file")
			return nil
		}
	}
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	next()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); r.Watch(stop, time.Millisecond) }()
	defer func() { close(stop); <-done }()

	user := func(tok string) string {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		u, err := a.Authenticate(req)
		if err != nil {
			return "refused"
		}
		return u.Name
	}
	if user("token-aaaa") != "alice" {
		t.Fatal("first file not in place")
	}
	// Same size, same modification time, another token.
	write("token-bbbb,bobby\n", stamp)
	if err := next(); err != nil {
		t.Fatal(err)
	}
	if got, gotB := user("token-aaaa"), user("token-bbbb"); got != "refused" || gotB != "bobby" {
		t.Fatalf("after the edit: old token %s, new token %s", got, gotB)
	}
	write("token-cccc,carol,1,dev,extra\n", stamp.Add(time.Second))
	if err := next(); err == nil {
		t.Fatal("a broken file reloaded without error")
	}
	if user("token-bbbb") != "bobby" || user("token-cccc") != "refused" {
		t.Fatal("a broken file changed the tokens")
	}
}

// TestAmbiguousCredentials: a request that carries its credential more
// than once (two Authorization headers, one holding several values, two
// bearer subprotocols) is refused as ambiguous, whichever of them is
// valid, before any of them is checked; Reject answers 400 for it.
func TestAmbiguousCredentials(t *testing.T) {
	a := New([]string{"alpha", "beta"}, nil)
	for _, tc := range []struct {
		name   string
		header http.Header
	}{
		{"two headers, the first valid", http.Header{"Authorization": {"Bearer alpha", "Bearer wrong"}}},
		{"two headers, the second valid", http.Header{"Authorization": {"Bearer wrong", "Bearer alpha"}}},
		{"two valid headers", http.Header{"Authorization": {"Bearer alpha", "Bearer beta"}}},
		{"the same header twice", http.Header{"Authorization": {"Bearer alpha", "Bearer alpha"}}},
		{"an empty second header", http.Header{"Authorization": {"Bearer alpha", ""}}},
		{"two values joined by a proxy", http.Header{"Authorization": {"Bearer alpha, Bearer beta"}}},
		{"two bearer subprotocols", http.Header{"Sec-Websocket-Protocol": {"wsmux.v1, base64url.bearer.authorization.k8s.io.YWxwaGE", "base64url.bearer.authorization.k8s.io.YmV0YQ"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header = tc.header
			_, err := a.Authenticate(r)
			var ae *Error
			if !errors.As(err, &ae) || ae.Reason != ReasonAmbiguous {
				t.Fatalf("%v, want %s", err, ReasonAmbiguous)
			}
			w := httptest.NewRecorder()
			Reject(w, err)
			if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "exactly one") {
				t.Errorf("Reject: %d %q, want 400 saying to send exactly one", w.Code, w.Body.String())
			}
		})
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer alpha")
	r.Header.Set("Sec-Websocket-Protocol", "wsmux.v1, x-stream-protocol-version.v4.channel.k8s.io")
	if who, err := a.Authenticate(r); err != nil || who.ID != "token#1" {
		t.Errorf("one header and other subprotocols: %q, %v", who.ID, err)
	}
}

// TestAsError: an Authenticator's refusal that is not an *Error is
// ReasonRejected and a 401; an *Error, wrapped or not, keeps its reason
// and status.
func TestAsError(t *testing.T) {
	amb := &Error{Reason: ReasonAmbiguous, Detail: "two headers"}
	for _, tt := range []struct {
		err    error
		reason string
		status int
	}{
		{errors.New("no session cookie"), ReasonRejected, http.StatusUnauthorized},
		{fmt.Errorf("login proxy: %w", &Error{Reason: ReasonBadToken, Detail: "x"}), ReasonBadToken, http.StatusUnauthorized},
		{amb, ReasonAmbiguous, http.StatusBadRequest},
	} {
		ae := AsError(tt.err)
		if ae.Reason != tt.reason || ae.StatusCode() != tt.status {
			t.Errorf("AsError(%v) = %q %d, want %q %d", tt.err, ae.Reason, ae.StatusCode(), tt.reason, tt.status)
		}
		rec := httptest.NewRecorder()
		Reject(rec, tt.err)
		if rec.Code != tt.status {
			t.Errorf("Reject(%v) answered %d, want %d", tt.err, rec.Code, tt.status)
		}
	}
	if AsError(amb) != amb {
		t.Error("AsError made a new *Error for an *Error")
	}
}
