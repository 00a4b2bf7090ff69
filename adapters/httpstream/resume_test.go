package httpstream_test

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	"github.com/wsmux/wsmux/mux"
	clientspdy "k8s.io/client-go/transport/spdy"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
)

// resetProxy forwards TCP connections to target and resets all of them on
// demand.
type resetProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newResetProxy(t *testing.T, target string) *resetProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &resetProxy{ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(u, c); _ = u.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, u); _ = c.Close() })
		}
	})
	t.Cleanup(func() { _ = ln.Close(); p.reset(); p.wg.Wait() })
	return p
}

func (p *resetProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.(*net.TCPConn).SetLinger(0)
		_ = c.Close()
	}
	p.conns = nil
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
	rt, err := wsmuxhttpstream.NewRoundTripperWithConfig(wsmuxhttpstream.RoundTripperConfig{
		TLS:    &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"},
		Resume: true,
		OnResumeEvent: func(e wsmuxhttpstream.ResumeEvent) {
			mu.Lock()
			kinds = append(kinds, e.Kind.String())
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "https://"+proxy.ln.Addr().String()+"/", nil)
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
			proxy.reset()
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
