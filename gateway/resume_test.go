package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/kubeclient"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/internal/testnet"
	"github.com/wsmux/wsmux/internal/wshandshake"
	"github.com/wsmux/wsmux/mux"
)

// resumeGateway is a gateway with resumption on in front of cl.
func resumeGateway(t *testing.T, cl *clustertest.Cluster) (*Gateway, *httptest.Server) {
	t.Helper()
	g, err := New(Config{
		Auth:          auth.New([]string{callerToken}, nil),
		Cluster:       cl.RestConfig(),
		Logger:        slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil)),
		ResumeTimeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	return g, serveGateway(t, g)
}

// events records a client's resume events.
type events struct {
	mu  sync.Mutex
	evs []mux.ResumeEvent
	ch  chan struct{} // closed at the first Refused
}

func (e *events) add(ev mux.ResumeEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
	if ev.Kind == mux.ResumeRefused && e.ch != nil {
		close(e.ch)
		e.ch = nil
	}
}

// chunkWriter signals each time the output has grown by at least n bytes.
type chunkWriter struct {
	mu   sync.Mutex
	b    bytes.Buffer
	n    int
	next int
	ch   chan struct{}
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	for w.b.Len() >= w.next {
		w.next += w.n
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// TestResumeOnAnotherReplicaFailsFast: an exec (cat) through gateway A
// resumes through A after a cut; then the load balancer sends the next
// resume to gateway B, which does not hold the session: B answers 404
// "Wsmux-Resume: unknown" at once and the exec fails at once, though the
// client would keep redialling for ten minutes on errors worth retrying.
func TestResumeOnAnotherReplicaFailsFast(t *testing.T) {
	cl := clustertest.Start(t)
	ga, a := resumeGateway(t, cl)
	gb, b := resumeGateway(t, cl)
	proxy := testnet.NewCutProxy(t, strings.TrimPrefix(a.URL, "http://"), 1<<62, 0)
	ev := &events{ch: make(chan struct{})}
	refused := ev.ch
	o := kubeclient.Options{Server: "http://" + proxy.Addr(), Token: callerToken,
		ResumeTimeout: 10 * time.Minute, OnResumeEvent: ev.add}
	inR, inW := io.Pipe()
	out := &chunkWriter{n: 256 << 10, next: 256 << 10, ch: make(chan struct{}, 1)}
	errc := make(chan error, 1)
	go func() {
		errc <- kubeclient.Exec(context.Background(), o, kubeclient.ExecOptions{
			Namespace: "default", Pod: "web-0", Container: "app", Command: []string{"cat"},
			Stdin: inR, Stdout: out, Stderr: io.Discard,
		})
	}()
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB
	send := func() {
		t.Helper()
		if _, err := inW.Write(chunk); err != nil {
			t.Fatal(err)
		}
		select {
		case <-out.ch:
		case err := <-errc:
			t.Fatalf("exec ended early: %v", err)
		}
	}
	send()
	proxy.Cut() // resumes on A
	send()
	proxy.SetTarget(strings.TrimPrefix(b.URL, "http://"))
	proxy.Cut()
	<-refused
	err := <-errc
	_ = inW.Close()
	if err == nil {
		t.Fatal("exec succeeded after its session was lost")
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var kinds []string
	for _, e := range ev.evs {
		kinds = append(kinds, e.Kind.String())
	}
	if got := strings.Join(kinds, ","); got != "lost,resumed,lost,refused" {
		t.Fatalf("events %s, want lost,resumed,lost,refused", got)
	}
	last := ev.evs[len(ev.evs)-1]
	if last.Status != 404 || !last.Unknown || !last.Final() {
		t.Fatalf("refusal %+v: want 404, unknown, final", last)
	}
	if got := ops.Value(ga.Metrics().Resumes.WithLabelValues("resumed")); got != 1 {
		t.Errorf("gateway A: %v resumes, want 1", got)
	}
	if got := ops.Value(gb.Metrics().Resumes.WithLabelValues("unknown")); got != 1 {
		t.Errorf("gateway B: %v unknown resumes, want 1", got)
	}
	if got := out.b.Len(); got != 2*len(chunk) {
		t.Errorf("echoed %d bytes before the loss, want %d", got, 2*len(chunk))
	}
}

// affinityProxy stands for a load balancer with cookie affinity in front
// of replicas: a request carrying the cookie name goes to the replica its
// value names, others go round-robin; Reset cuts every connection.
type affinityProxy struct {
	ln       net.Listener
	cookie   string
	replicas map[string]string // cookie value -> address
	order    []string
	mu       sync.Mutex
	next     int
	conns    []net.Conn
	routed   map[string]int // replica -> connections
	wg       sync.WaitGroup
}

func newAffinityProxy(t *testing.T, cookie string, replicas map[string]string, order []string) *affinityProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &affinityProxy{ln: ln, cookie: cookie, replicas: replicas, order: order, routed: map[string]int{}}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.serve(c) })
		}
	})
	t.Cleanup(func() { _ = ln.Close(); p.reset(); p.wg.Wait() })
	return p
}

func (p *affinityProxy) serve(c net.Conn) {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	name := ""
	if ck, err := req.Cookie(p.cookie); err == nil && p.replicas[ck.Value] != "" {
		name = ck.Value
	} else {
		name = p.order[p.next%len(p.order)]
		p.next++
	}
	p.routed[name]++
	p.mu.Unlock()
	u, err := net.Dial("tcp", p.replicas[name])
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, u)
	p.mu.Unlock()
	if err := req.Write(u); err != nil {
		_ = c.Close()
		_ = u.Close()
		return
	}
	p.wg.Go(func() { _, _ = io.Copy(u, br); _ = u.Close() })
	_, _ = io.Copy(c, u)
	_ = c.Close()
}

func (p *affinityProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.(*net.TCPConn).SetLinger(0)
		_ = c.Close()
	}
	p.conns = nil
}

// TestResumeAffinityCookie: two gateway replicas set their affinity
// cookie at the upgrade; a balancer routes requests with the cookie to
// its replica and others round-robin. An exec (cat) survives three cuts:
// every resume carries the cookie and lands on the replica holding the
// session (without it, the first resume would go to the other replica
// and get 404).
func TestResumeAffinityCookie(t *testing.T) {
	cl := clustertest.Start(t)
	replica := func(name string) (*Gateway, string) {
		g, err := New(Config{
			Auth: auth.New([]string{callerToken}, nil), Cluster: cl.RestConfig(),
			Logger:         slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil)),
			ResumeTimeout:  time.Minute,
			AffinityCookie: &http.Cookie{Name: "wsmux-replica", Value: name, Path: "/", HttpOnly: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		return g, strings.TrimPrefix(serveGateway(t, g).URL, "http://")
	}
	ga, a := replica("a")
	gb, b := replica("b")
	proxy := newAffinityProxy(t, "wsmux-replica", map[string]string{"a": a, "b": b}, []string{"a", "b"})
	ev := &events{}
	o := kubeclient.Options{Server: "http://" + proxy.ln.Addr().String(), Token: callerToken,
		ResumeTimeout: time.Minute, OnResumeEvent: ev.add}
	inR, inW := io.Pipe()
	out := &chunkWriter{n: 256 << 10, next: 256 << 10, ch: make(chan struct{}, 1)}
	errc := make(chan error, 1)
	go func() {
		errc <- kubeclient.Exec(context.Background(), o, kubeclient.ExecOptions{
			Namespace: "default", Pod: "web-0", Container: "app", Command: []string{"cat"},
			Stdin: inR, Stdout: out, Stderr: io.Discard,
		})
	}()
	chunk := bytes.Repeat([]byte("affinity cookie!"), 16<<10) // 256 KiB
	for i := range 4 {
		if _, err := inW.Write(chunk); err != nil {
			t.Fatal(err)
		}
		select {
		case <-out.ch:
		case err := <-errc:
			t.Fatalf("exec ended after %d cuts: %v", i, err)
		}
		if i < 3 {
			proxy.reset()
		}
	}
	_ = inW.Close()
	if err := <-errc; err != nil {
		t.Fatalf("exec: %v", err)
	}
	if got := out.b.Len(); got != 4*len(chunk) {
		t.Fatalf("echoed %d bytes, want %d", got, 4*len(chunk))
	}
	ev.mu.Lock()
	var kinds []string
	for _, e := range ev.evs {
		kinds = append(kinds, e.Kind.String())
	}
	ev.mu.Unlock()
	if got := strings.Join(kinds, ","); got != "lost,resumed,lost,resumed,lost,resumed" {
		t.Fatalf("events %s", got)
	}
	if got := ops.Value(ga.Metrics().Resumes.WithLabelValues("resumed")); got != 3 {
		t.Errorf("replica a: %v resumes, want 3", got)
	}
	if got := ops.Value(gb.Metrics().Resumes.WithLabelValues("unknown")); got != 0 {
		t.Errorf("replica b: %v resumes it did not hold, want 0", got)
	}
	if s, r := gathered(t, ga, "wsmux_suspensions_total", "suspended"), gathered(t, ga, "wsmux_suspensions_total", "resumed"); s != 3 || r != 3 {
		t.Errorf("replica a: wsmux_suspensions_total suspended %v, resumed %v; want 3 and 3", s, r)
	}
	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	if proxy.routed["a"] != 4 || proxy.routed["b"] != 0 {
		t.Errorf("routed %v, want a:4 (the session and its 3 resumes)", proxy.routed)
	}
}

// TestResumeOtherCallerRefused: a session's resume token presented by
// another caller (another valid token) gets 403, counted as forbidden.
func TestResumeOtherCallerRefused(t *testing.T) {
	cl := clustertest.Start(t)
	g, err := New(Config{
		Auth: auth.New([]string{"token-a", "token-b"}, nil), Cluster: cl.RestConfig(),
		Logger:        slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil)),
		ResumeTimeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveGateway(t, g)
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/api/v1/namespaces/default/pods/web-0/portforward"
	hdr := func(token string) http.Header {
		return http.Header{"Authorization": {"Bearer " + token}, "X-Stream-Protocol-Version": {"portforward.k8s.io"}}
	}
	ctx := context.Background()
	conn, br, h, err := wshandshake.Dial(ctx, url, wshandshake.DialOptions{Header: hdr("token-a")})
	if err != nil {
		t.Fatal(err)
	}
	tok := h.Get(mux.HeaderResumeToken)
	if tok == "" {
		t.Fatal("no resume token in the gateway's 101")
	}
	// Resumption is in effect once both SETTINGS offered it: ours, then
	// the gateway's arrives. The gateway answers our PING after it read our
	// SETTINGS: until that answer, a cut could come before it did.
	var set frame.Settings
	_ = set.Set(frame.SettingFeatures, frame.FeatureResume)
	if err := ws.WriteFrame(conn, ws.MaskFrame(ws.NewBinaryFrame(frame.AppendPing(frame.AppendSettings(nil, &set), false, 7)))); err != nil {
		t.Fatal(err)
	}
	if br == nil {
		br = bufio.NewReader(conn)
	}
	var it frame.Iterator
	for first, answered := true, false; !answered; {
		f, err := ws.ReadFrame(br)
		if err != nil {
			t.Fatal(err)
		}
		for it.Reset(f.Payload, frame.DefaultLimits()); it.Next(); first = false {
			fh := it.Frame().Header
			if first && fh.Type != frame.TypeSettings {
				t.Fatalf("the gateway's first frame: %+v; want SETTINGS", fh)
			}
			answered = answered || fh.Type == frame.TypePing && fh.Flags&frame.FlagACK != 0 && fh.Arg == 7
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	_ = conn.Close() // dropped: the gateway suspends the session
	resume := func(token string) (net.Conn, http.Header, error) {
		h := hdr(token)
		h.Set(mux.HeaderResumeToken, tok)
		h.Set(mux.HeaderResumeReceived, "0")
		c, _, rh, err := wshandshake.Dial(ctx, url, wshandshake.DialOptions{Header: h})
		return c, rh, err
	}
	// 503: the session is still starting or being suspended; retried as
	// the spec says.
	retrying := func(token string) (c net.Conn, rh http.Header, err error) {
		var he *mux.HandshakeError
		for {
			c, rh, err = resume(token)
			if !errors.As(err, &he) || he.StatusCode != http.StatusServiceUnavailable {
				return c, rh, err
			}
		}
	}
	var he *mux.HandshakeError
	if _, _, err = retrying("token-b"); !errors.As(err, &he) || he.StatusCode != http.StatusForbidden {
		t.Fatalf("another caller's resume: %v, want 403", err)
	}
	if got := ops.Value(g.Metrics().Resumes.WithLabelValues("forbidden")); got != 1 {
		t.Errorf("%v forbidden resumes counted, want 1", got)
	}
	// The session is undisturbed: its owner resumes it.
	c, _, err := retrying("token-a")
	if err != nil {
		t.Fatalf("the owner's resume after the refused one: %v", err)
	}
	_ = c.Close()
}

// gathered returns the value of the series of g's metric name whose only
// label has value v.
func gathered(t *testing.T, g *Gateway, name, v string) float64 {
	t.Helper()
	mfs, err := g.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == v {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{%s}", name, v)
	return 0
}

// TestResumeTimeoutFailsExec: the gateway becomes unreachable after a
// cut (the balancer in front accepts and drops every connection); the
// client redials until its resume timeout, then the exec fails with the
// resume timeout's error (not a clean end with exit status 0).
func TestResumeTimeoutFailsExec(t *testing.T) {
	cl := clustertest.Start(t)
	_, a := resumeGateway(t, cl)
	proxy := testnet.NewCutProxy(t, strings.TrimPrefix(a.URL, "http://"), 1<<62, 0)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	_ = dead.Close() // connections to it are refused
	ev := &events{}
	o := kubeclient.Options{Server: "http://" + proxy.Addr(), Token: callerToken,
		ResumeTimeout: 500 * time.Millisecond, OnResumeEvent: ev.add}
	inR, inW := io.Pipe()
	defer inW.Close()
	out := &chunkWriter{n: 64 << 10, next: 64 << 10, ch: make(chan struct{}, 1)}
	errc := make(chan error, 1)
	go func() {
		errc <- kubeclient.Exec(context.Background(), o, kubeclient.ExecOptions{
			Namespace: "default", Pod: "web-0", Container: "app", Command: []string{"cat"},
			Stdin: inR, Stdout: out, Stderr: io.Discard,
		})
	}()
	if _, err := inW.Write(bytes.Repeat([]byte("x"), 64<<10)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-out.ch:
	case err := <-errc:
		t.Fatalf("exec ended early: %v", err)
	}
	proxy.SetTarget(deadAddr)
	proxy.Cut()
	err = <-errc
	if !errors.Is(err, mux.ErrResumeTimeout) {
		t.Fatalf("exec after the resume timeout: %v; want mux.ErrResumeTimeout", err)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.evs) == 0 || ev.evs[0].Kind != mux.ResumeLost {
		t.Fatalf("events %+v: want lost first", ev.evs)
	}
	for _, e := range ev.evs[1:] {
		if e.Kind == mux.ResumeResumed || e.Kind == mux.ResumeLost {
			t.Fatalf("events %+v: want only failed redials after the loss", ev.evs)
		}
	}
}
