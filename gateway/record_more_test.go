package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/kubeclient"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/gateway/recording"
)

// TestRecordAttachAndWsmux: kubectl attach and a wsmux client's exec
// (gateway/kubeclient) are recorded like kubectl's exec.
func TestRecordAttachAndWsmux(t *testing.T) {
	e := startRecorded(t, recording.Config{}, false)
	out, errOut, code := e.k.Run(t, "alice-token", nil, strings.NewReader("attached\n"), "attach", "-i", "-n", "a", "web-0")
	if code != 0 || out != "attached\n" {
		t.Fatalf("attach: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	c := e.next(t)
	if c.meta.Kind != "attach" || c.text("o") != "attached\n" || c.exit() != "0" || c.text("i") != "" {
		t.Errorf("attach recording: kind %q, output %q, exit %q, stdin %q", c.meta.Kind, c.text("o"), c.exit(), c.text("i"))
	}

	pool := x509.NewCertPool()
	pool.AddCert(e.srv.Certificate())
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := kubeclient.Exec(ctx, kubeclient.Options{Server: e.srv.URL, Token: "alice-token", TLS: &tls.Config{RootCAs: pool}}, kubeclient.ExecOptions{
		Namespace: "a", Pod: "web-0", Container: "app", Command: []string{"sh", "-c", "echo wsmux-out; echo wsmux-err >&2"},
		Stdout: &stdout, Stderr: &stderr,
	})
	if err != nil || stdout.String() != "wsmux-out\n" {
		t.Fatalf("wsmux exec: %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
	c = e.next(t)
	if c.meta.Protocol != "wsmux" || c.text("o") != "wsmux-out\n" || c.text("e") != "wsmux-err\n" || c.exit() != "0" {
		t.Errorf("wsmux recording: protocol %q, stdout %q, stderr %q, exit %q", c.meta.Protocol, c.text("o"), c.text("e"), c.exit())
	}
}

// TestRecordFloodBounded: a session that floods its terminal gets all of
// its output, at full speed; its recording keeps up to the size bound and
// says where it stopped.
func TestRecordFloodBounded(t *testing.T) {
	const bound = 64 << 10
	e := startRecorded(t, recording.Config{MaxBytes: bound}, false)
	out, errOut, code := e.k.Run(t, "alice-token", nil, nil, "exec", "-n", "a", "web-0", "--", "sh", "-c", "yes flood | head -c 4000000")
	if code != 0 || len(out) != 4_000_000 {
		t.Fatalf("flood: exit %d, %d bytes of stdout, stderr %q", code, len(out), errOut)
	}
	c := e.next(t)
	if got := len(c.text("o")); got != bound {
		t.Errorf("recorded %d bytes of output, want the bound, %d", got, bound)
	}
	if !strings.Contains(c.text("m"), "size bound (65536 bytes) reached") || c.exit() != "0" {
		t.Errorf("markers %q", c.text("m"))
	}
	if n := ops.Value(e.rec.Metrics().Dropped.WithLabelValues("size")); n != 4_000_000-bound {
		t.Errorf("wsmux_recording_dropped_bytes_total{reason=size} = %v, want %d", n, 4_000_000-bound)
	}
}

// TestRecordHTTPSinkAndFailOpen: with the HTTP sink a collector receives
// each recording as one POST; without --recording-required a sink that
// fails mid-session costs the recording, not the session.
func TestRecordHTTPSinkAndFailOpen(t *testing.T) {
	got := make(chan string, 4)
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r.Header.Get("Content-Type") + "\n" + string(b)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer col.Close()
	e := startRecorded(t, recording.Config{Sink: &recording.HTTPSink{URL: col.URL}}, false)
	out, errOut, code := e.k.Run(t, "alice-token", nil, nil, "exec", "-n", "a", "web-0", "--", "sh", "-c", "echo to-collector")
	if code != 0 || out != "to-collector\n" {
		t.Fatalf("exec: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	select {
	case body := <-got:
		ct, cast, _ := strings.Cut(body, "\n")
		c := parseCastFile(t, []byte(cast))
		if ct != recording.ContentCast || c.text("o") != "to-collector\n" || c.exit() != "0" || c.meta.User != "alice" {
			t.Errorf("collector got %s:\n%s", ct, cast)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the collector got nothing")
	}

	e = startRecorded(t, recording.Config{}, false)
	e.sink.fail.Store(true)
	out, errOut, code = e.k.Run(t, "alice-token", nil, strings.NewReader("still\n"), "exec", "-i", "-n", "a", "web-0", "--", "cat")
	if code != 0 || out != "still\n" {
		t.Errorf("a failed optional recording disturbed the session: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	<-e.sink.closed
	if n := ops.Value(e.rec.Metrics().SinkFailures.WithLabelValues("write")); n != 1 {
		t.Errorf("sink failures (write) = %v, want 1", n)
	}
}
