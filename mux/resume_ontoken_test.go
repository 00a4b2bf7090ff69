package mux_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/mux"
)

// TestResumeRegistryOnToken: the registry reports every token it hands
// out before the client holds it (the first one, then the one each resume
// answers with) and every token it forgets (the used one once the resumed
// connection carried a message, the rest when the session ends), so that
// at any time the issued-minus-forgotten set holds the session's valid
// tokens, and none once it ended.
func TestResumeRegistryOnToken(t *testing.T) {
	var mu sync.Mutex
	live := map[[32]byte]bool{}
	issued, forgotten := 0, 0
	changed := make(chan struct{}, 16)
	reg := &mux.ResumeRegistry{OnToken: func(k [32]byte, in bool) {
		mu.Lock()
		defer mu.Unlock()
		if in {
			issued++
			live[k] = true
		} else if live[k] {
			forgotten++
			delete(live, k)
		}
		select {
		case changed <- struct{}{}:
		default:
		}
	}}
	ended := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, err := mux.Upgrade(w, r, &mux.Config{Resume: true, ResumeRegistry: reg})
		if err != nil {
			return
		}
		go func() {
			defer close(ended)
			defer sess.Close()
			st, err := sess.AcceptStream(context.Background())
			if err != nil {
				return
			}
			_, _ = io.Copy(st, st)
			_ = st.Close()
			<-sess.Done()
		}()
	}))
	defer srv.Close()
	var cmu sync.Mutex
	var conns []net.Conn
	d := mux.Dialer{Config: &mux.Config{Resume: true}, NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		cmu.Lock()
		conns = append(conns, c)
		cmu.Unlock()
		return c, err
	}}
	ctx := context.Background()
	sess, err := d.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := sess.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	echo := bufio.NewReader(st)
	for i, line := range []string{"one\n", "two\n", "three\n"} {
		if i > 0 {
			cmu.Lock()
			_ = conns[len(conns)-1].Close()
			cmu.Unlock()
		}
		_, _ = io.WriteString(st, line)
		if got, err := echo.ReadString('\n'); err != nil || got != line {
			t.Fatalf("echo %d: %q, %v", i, got, err)
		}
	}
	wait := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			mu.Lock()
			done := ok()
			mu.Unlock()
			if done {
				return
			}
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("%s: issued %d, forgotten %d, live %d", what, issued, forgotten, len(live))
			}
		}
	}
	// One session, two resumes: three tokens issued; the two used ones
	// are forgotten once their resumed connection carried a message.
	wait("after two resumes", func() bool { return issued == 3 && len(live) == 1 })
	_ = sess.Close()
	<-ended
	wait("after the session ended", func() bool { return len(live) == 0 && forgotten == 3 })
}
