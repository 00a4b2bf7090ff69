package httpstream_test

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	"github.com/wsmux/wsmux/internal/resetproxy"
	"github.com/wsmux/wsmux/mux"
	clientspdy "k8s.io/client-go/transport/spdy"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
)

// newResetProxy starts a TCP proxy to target that resets every connection
// through it on demand.
func newResetProxy(t *testing.T, target string) *resetproxy.Proxy {
	p, err := resetproxy.Listen(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// resumableEchoHandler is echoHandler with resumption on (the upgrader
// registers each session; resume requests are served by the registry).
func resumableEchoHandler(reg *mux.ResumeRegistry) http.Handler {
	cfg := &mux.Config{Resume: true, ResumeRegistry: reg, ResumeTimeout: 30 * time.Second}
	up := wsmuxhttpstream.NewResponseUpgraderWithConfig(cfg)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(mux.HeaderResumeToken) == "" {
			if _, err := k8shttpstream.Handshake(r, w, []string{testProtocol}); err != nil {
				return
			}
		}
		c := up.UpgradeResponse(w, r, func(s k8shttpstream.Stream, replySent <-chan struct{}) error {
			go func() {
				<-replySent
				_, _ = io.Copy(s, s)
				_ = s.Close()
			}()
			return nil
		})
		if c != nil {
			<-c.CloseChan()
		}
	})
}

// TestRoundTripperResume: client-go's Negotiate over a RoundTripper with
// Resume, to a TLS server whose upgrader has resumption on, through a
// proxy that resets the connection twice while 8 MiB echo on one stream:
// the echo is whole (sha256), the connection is the same one, and the
// events say lost, resumed, lost, resumed.
func TestRoundTripperResume(t *testing.T) {
	srv := httptest.NewUnstartedServer(resumableEchoHandler(&mux.ResumeRegistry{}))
	srv.EnableHTTP2 = false
	srv.StartTLS()
	defer srv.Close()
	proxy := newResetProxy(t, strings.TrimPrefix(srv.URL, "https://"))
	var mu sync.Mutex
	var kinds []string
	resumed := make(chan struct{}, 2) // events come from the session's own goroutine
	rt, err := wsmuxhttpstream.NewRoundTripperWithConfig(wsmuxhttpstream.RoundTripperConfig{
		TLS:    &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"},
		Resume: true,
		OnResumeEvent: func(e wsmuxhttpstream.ResumeEvent) {
			mu.Lock()
			kinds = append(kinds, e.Kind.String())
			mu.Unlock()
			if e.Kind == wsmuxhttpstream.ResumeResumed {
				resumed <- struct{}{}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "https://"+proxy.Addr()+"/", nil)
	conn, proto, err := clientspdy.Negotiate(rt, &http.Client{Transport: rt}, req, testProtocol)
	if err != nil {
		t.Fatalf("Negotiate: %v", err)
	}
	defer conn.Close()
	if proto != testProtocol {
		t.Fatalf("protocol %q, want %q", proto, testProtocol)
	}
	s, err := conn.CreateStream(http.Header{"Streamtype": {"data"}})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("resumable wsmux "), 512<<10) // 8 MiB
	go func() {
		_, _ = s.Write(data)
		_ = s.Close()
	}()
	h := sha256.New()
	buf := make([]byte, 64<<10)
	got, cuts := 0, 0
	for {
		n, err := s.Read(buf)
		h.Write(buf[:n])
		got += n
		if cuts < 2 && got >= (cuts+1)*len(data)/3 {
			proxy.Cut()
			cuts++
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Read after %d bytes, %d cuts: %v", got, cuts, err)
		}
	}
	if want := sha256.Sum256(data); got != len(data) || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("echo: %d bytes of %d, sha256 differs", got, len(data))
	}
	st := conn.(interface{ Session() *mux.Session }).Session().Stats()
	if st.Suspends != 2 || st.Resumes != 2 {
		t.Fatalf("%d suspensions, %d resumes; want 2 and 2", st.Suspends, st.Resumes)
	}
	<-resumed // the echo came back over both resumed connections: their
	<-resumed // events were posted before, and are delivered in order
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(kinds, ","); got != "lost,resumed,lost,resumed" {
		t.Fatalf("events %s", got)
	}
}

// TestRoundTripperResumeWithoutServerSupport: a RoundTripper with Resume
// against a server that does not offer it works as without it.
func TestRoundTripperResumeWithoutServerSupport(t *testing.T) {
	srv := httptest.NewServer(echoHandler(t))
	defer srv.Close()
	rt, err := wsmuxhttpstream.NewRoundTripperWithConfig(wsmuxhttpstream.RoundTripperConfig{Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	roundTripEcho(t, rt, srv.URL)
}
