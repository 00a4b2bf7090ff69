package gateway

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/cmd/wsmux/internal/auth"
	"github.com/wsmux/wsmux/cmd/wsmux/internal/clustertest"
	"github.com/wsmux/wsmux/cmd/wsmux/internal/kubeclient"
	"github.com/wsmux/wsmux/cmd/wsmux/internal/ops"
	"github.com/wsmux/wsmux/cmd/wsmux/internal/testnet"
	"github.com/wsmux/wsmux/internal/resumedial"
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
	evs []resumedial.Event
	ch  chan struct{} // closed at the first Refused
}

func (e *events) add(ev resumedial.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
	if ev.Kind == resumedial.Refused && e.ch != nil {
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
	o := kubeclient.Options{Server: "http://" + proxy.Addr, Token: callerToken,
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
		<-out.ch
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
