package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/gateway/recording"
	"github.com/wsmux/wsmux/internal/testnet"
)

// notifySink is a DirSink that says when a recording is complete (its
// writer closed) and can be made to fail its writes.
type notifySink struct {
	recording.DirSink
	closed chan string // file names
	fail   atomic.Bool
}

type notifyFile struct {
	*os.File
	s    *notifySink
	name string
}

func (s *notifySink) Open(ctx context.Context, m recording.Meta) (io.WriteCloser, error) {
	w, err := s.DirSink.Open(ctx, m)
	if err != nil {
		return nil, err
	}
	return &notifyFile{File: w.(*os.File), s: s, name: s.Name(m)}, nil
}

func (f *notifyFile) Write(p []byte) (int, error) {
	if f.s.fail.Load() {
		return 0, errors.New("the recording disk is full")
	}
	return f.File.Write(p)
}

func (f *notifyFile) Close() error {
	err := f.File.Close()
	f.s.closed <- f.name
	return err
}

// recEnv is a gateway that records into a directory, in front of a
// stand-in cluster (PTY: a shell on a pseudo-terminal for TTY sessions),
// and the kubectl on this machine.
type recEnv struct {
	*kubectlEnv
	sink *notifySink
	rec  *recording.Recorder
}

func startRecorded(t *testing.T, cfg recording.Config, pty bool) *recEnv {
	t.Helper()
	cl, err := clustertest.New(clustertest.Options{Dir: t.TempDir(), PTY: pty})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	cl.SetRBAC(map[string][]string{"alice": {"a"}, "group:ops": {"*"}})
	log := slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil))
	toks, err := auth.ParseTokens("tokens", []byte(tokenFile))
	if err != nil {
		t.Fatal(err)
	}
	m := ops.NewMetrics()
	sink := &notifySink{DirSink: recording.DirSink{Dir: t.TempDir()}, closed: make(chan string, 16)}
	if cfg.Sink == nil {
		cfg.Sink = sink
	}
	cfg.Metrics = recording.NewMetrics(m.Registry)
	rec, err := recording.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{Auth: auth.NewWithUsers(toks, nil), Impersonate: true, Cluster: cl.RestConfig(), Logger: log, Metrics: m, Recording: rec})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(g.Handler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.Metrics().Sessions.Drain(ctx)
	})
	k := testnet.NewKubectl(t, srv.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	return &recEnv{kubectlEnv: &kubectlEnv{gw: &gw{g: g, srv: srv, cl: cl}, k: k}, sink: sink, rec: rec}
}

// next waits for the next complete recording and parses it.
func (e *recEnv) next(t *testing.T) castFile {
	t.Helper()
	select {
	case name := <-e.sink.closed:
		b, err := os.ReadFile(filepath.Join(e.sink.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return parseCastFile(t, b)
	case <-time.After(30 * time.Second):
		t.Fatal("no recording completed")
	}
	return castFile{}
}

// castFile is a parsed asciicast v2 recording.
type castFile struct {
	raw    string
	width  int
	height int
	meta   recording.Meta
	events [][3]any
}

func parseCastFile(t *testing.T, b []byte) castFile {
	t.Helper()
	c := castFile{raw: string(b)}
	sc := bufio.NewScanner(strings.NewReader(c.raw))
	sc.Buffer(nil, 1<<24)
	for i := 0; sc.Scan(); i++ {
		if i == 0 {
			var h struct {
				Version, Width, Height int
				Wsmux                  recording.Meta
			}
			if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Version != 2 {
				t.Fatalf("header %q: %v", sc.Text(), err)
			}
			c.width, c.height, c.meta = h.Width, h.Height, h.Wsmux
			continue
		}
		var ev []any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || len(ev) != 3 {
			t.Fatalf("event %q: %v", sc.Text(), err)
		}
		c.events = append(c.events, [3]any{ev[0], ev[1], ev[2]})
	}
	return c
}

func (c castFile) text(code string) string {
	var s strings.Builder
	for _, e := range c.events {
		if e[1] == code {
			s.WriteString(e[2].(string))
		}
	}
	return s.String()
}

func (c castFile) exit() string {
	if len(c.events) == 0 {
		return ""
	}
	last := c.events[len(c.events)-1]
	if last[1] != "m" {
		return ""
	}
	return strings.TrimPrefix(last[2].(string), "exit ")
}

// TestRecordKubectlNonTTY: unmodified kubectl's exec without a terminal,
// over WebSocket and SPDY: the recording has stdout and stderr apart, the
// exit code, who and what; what the caller sends is not in it, unless the
// policy asks for stdin.
func TestRecordKubectlNonTTY(t *testing.T) {
	policy := &recording.PolicyStore{}
	p, err := recording.ParsePolicy([]byte("sessions:\n- namespaces: [a]\n  pods: [stdin-*]\n  stdin: true\n- users: ['*']\n"))
	if err != nil {
		t.Fatal(err)
	}
	policy.Set(p)
	e := startRecorded(t, recording.Config{Policy: policy, Cluster: "standin"}, false)
	for _, mode := range []struct {
		name  string
		env   []string
		proto string
	}{{"websocket", wsOn, ProtoWebSocket}, {"spdy", spdyOnly, "spdy"}} {
		t.Run(mode.name, func(t *testing.T) {
			out, errOut, code := e.k.Run(t, "alice-token", mode.env, nil, "exec", "-n", "a", "web-0", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
			if code != 3 || out != "out\n" || !strings.Contains(errOut, "err\n") {
				t.Fatalf("exec sh: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			c := e.next(t)
			if c.text("o") != "out\n" || c.text("e") != "err\n" || c.exit() != "3" {
				t.Errorf("recorded stdout %q, stderr %q, exit %q; want out, err, 3\n%s", c.text("o"), c.text("e"), c.exit(), c.raw)
			}
			m := c.meta
			if m.User != "alice" || m.Caller == "" || strings.Join(m.Groups, ",") != "dev,qa" || m.Cluster != "standin" ||
				m.Namespace != "a" || m.Pod != "web-0" || m.Kind != "exec" || m.TTY || m.Protocol != mode.proto ||
				strings.Join(m.Command, " ") != "sh -c echo out; echo err >&2; exit 3" || m.Start.IsZero() {
				t.Errorf("header %+v", m)
			}

			// Stdin: absent unless the policy asks for it.
			for _, pod := range []string{"web-0", "stdin-0"} {
				out, errOut, code = e.k.Run(t, "alice-token", mode.env, strings.NewReader("typed-password\n"), "exec", "-i", "-n", "a", pod, "--", "sh", "-c", "cat >/dev/null; echo done")
				if code != 0 || out != "done\n" {
					t.Fatalf("exec -i: exit %d, stdout %q, stderr %q", code, out, errOut)
				}
				c = e.next(t)
				asked := pod == "stdin-0"
				if c.meta.Stdin != asked || strings.Contains(c.raw, "typed-password") != asked || (c.text("i") == "typed-password\n") != asked {
					t.Errorf("pod %s: stdin_recorded %v, stdin events %q; want recorded=%v\n%s", pod, c.meta.Stdin, c.text("i"), asked, c.raw)
				}
			}
		})
	}
	if n := ops.Value(e.rec.Metrics().Recordings.WithLabelValues("exec")); n != 6 {
		t.Errorf("wsmux_recordings_total{kind=exec} = %v, want 6", n)
	}
	if n := ops.Value(e.rec.Metrics().Bytes); n <= 0 {
		t.Errorf("wsmux_recording_bytes_total = %v", n)
	}
}

// TestRecordKubectlFailClosed: --recording-required with a dead sink
// refuses the session before anything reaches the cluster, and kubectl
// prints why; a sink that fails mid-session ends the session with the
// reason on the caller's terminal.
func TestRecordKubectlFailClosed(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	e := startRecorded(t, recording.Config{Sink: &recording.HTTPSink{URL: deadURL}, Required: true, OpenTimeout: 5 * time.Second}, false)
	for _, mode := range []struct {
		name string
		env  []string
	}{{"websocket", wsOn}, {"spdy", spdyOnly}} {
		before := e.upgrades(ProtoWebSocket, "exec") + e.upgrades("spdy", "exec")
		_, errOut, code := e.k.Run(t, "alice-token", mode.env, nil, "exec", "-n", "a", "web-0", "--", "sh", "-c", "echo should-not-run")
		if code == 0 || !strings.Contains(errOut, "recording cannot start") {
			t.Errorf("%s: dead sink: exit %d, stderr %q; want a refusal naming the recording", mode.name, code, errOut)
		}
		if after := e.upgrades(ProtoWebSocket, "exec") + e.upgrades("spdy", "exec"); after != before {
			t.Errorf("%s: %v sessions of a refused caller were upgraded", mode.name, after-before)
		}
	}
	// kubectl retries a refused WebSocket exec over SPDY: 3 refusals.
	if n := ops.Value(e.rec.Metrics().Refused.WithLabelValues("open")); n != 3 {
		t.Errorf("refused(open) = %v, want 3", n)
	}

	t.Run("mid-session", func(t *testing.T) {
		e := startRecorded(t, recording.Config{Required: true}, false)
		for _, mode := range []struct {
			name string
			env  []string
		}{{"websocket", wsOn}, {"spdy", spdyOnly}} {
			t.Run(mode.name, func(t *testing.T) {
				e.sink.fail.Store(false)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				kc := e.k.Cmd(ctx, "alice-token", mode.env, "exec", "-i", "-n", "a", "web-0", "--", "cat")
				stdin, _ := kc.StdinPipe()
				defer stdin.Close()
				out := &notifyWriter{want: "first", seen: make(chan struct{})}
				errOut := &notifyWriter{want: "recording failed", seen: make(chan struct{})}
				kc.Stdout, kc.Stderr = out, errOut
				if err := kc.Start(); err != nil {
					t.Fatal(err)
				}
				stdin.Write([]byte("first\n"))
				select {
				case <-out.seen:
				case <-ctx.Done():
					t.Fatalf("no echo; stderr %q", errOut.String())
				}
				e.sink.fail.Store(true) // the disk fills up
				stdin.Write([]byte("second\n"))
				select {
				case <-errOut.seen:
				case <-ctx.Done():
					t.Fatalf("no message; stdout %q stderr %q", out.String(), errOut.String())
				}
				err := kc.Wait()
				if err == nil {
					t.Errorf("kubectl exited 0 after its session was ended; stderr %q", errOut.String())
				}
				t.Logf("kubectl: %v; stderr %q", err, errOut.String())
				<-e.sink.closed
			})
		}
		if n := ops.Value(e.rec.Metrics().Refused.WithLabelValues("write")); n != 2 {
			t.Errorf("refused(write) = %v, want 2", n)
		}
	})
}

// TestRecordPortForward: a port-forward gets a record (ports, bytes each
// way), not its bytes.
func TestRecordPortForward(t *testing.T) {
	e := startRecorded(t, recording.Config{}, false)
	ctx, cancel := context.WithCancel(context.Background())
	addrs, stop := testnet.PortForward(t, e.k.Cmd(ctx, "alice-token", nil, "port-forward", "-n", "a", "web-0", ":8080"), cancel, 1)
	if err := testnet.EchoThrough(addrs[0], 100_000); err != nil {
		t.Fatal(err)
	}
	stop()
	var name string
	select {
	case name = <-e.sink.closed:
	case <-time.After(30 * time.Second):
		t.Fatal("no record")
	}
	b, _ := os.ReadFile(filepath.Join(e.sink.Dir, name))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var end struct {
		Ports          []string
		ToPod, FromPod int64   `json:"-"`
		To             int64   `json:"bytes_to_pod"`
		From           int64   `json:"bytes_from_pod"`
		Duration       float64 `json:"duration_seconds"`
	}
	if !strings.HasSuffix(name, ".portforward.jsonl") || len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &end) != nil {
		t.Fatalf("%s: %q", name, lines)
	}
	if strings.Join(end.Ports, ",") != "8080" || end.To != 100_000 || end.From != 100_000 || end.Duration <= 0 {
		t.Errorf("record %+v", end)
	}
	if !strings.Contains(lines[0], `"user":"alice"`) || !strings.Contains(lines[0], `"kind":"portforward"`) {
		t.Errorf("header %s", lines[0])
	}
}
