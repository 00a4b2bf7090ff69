package recording

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsmux/wsmux/gateway/ops"
)

// cast is a parsed recording: its header and events.
type cast struct {
	header map[string]any
	meta   Meta
	events [][3]any
	lines  []string
}

func parseCast(t *testing.T, b []byte) cast {
	t.Helper()
	var c cast
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<24)
	for i := 0; sc.Scan(); i++ {
		c.lines = append(c.lines, sc.Text())
		if i == 0 {
			if err := json.Unmarshal(sc.Bytes(), &c.header); err != nil {
				t.Fatalf("header %q: %v", sc.Text(), err)
			}
			var h struct{ Wsmux Meta }
			_ = json.Unmarshal(sc.Bytes(), &h)
			c.meta = h.Wsmux
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

// text is the concatenated data of the events of code.
func (c cast) text(code string) string {
	var s strings.Builder
	for _, e := range c.events {
		if e[1] == code {
			s.WriteString(e[2].(string))
		}
	}
	return s.String()
}

// memSink keeps recordings in memory; fail makes writes fail after n
// bytes, block holds writes until released.
type memSink struct {
	mu      sync.Mutex
	bufs    []*bytes.Buffer
	openErr error
	failAt  int
	block   chan struct{}
}

type memWriter struct {
	s      *memSink
	b      *bytes.Buffer
	closed chan struct{}
	once   sync.Once
}

func (s *memSink) Open(_ context.Context, _ Meta) (io.WriteCloser, error) {
	if s.openErr != nil {
		return nil, s.openErr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := &bytes.Buffer{}
	s.bufs = append(s.bufs, b)
	return &memWriter{s: s, b: b, closed: make(chan struct{})}, nil
}

func (w *memWriter) Write(p []byte) (int, error) {
	if w.s.block != nil {
		select {
		case <-w.s.block:
		case <-w.closed:
			return 0, errors.New("closed")
		}
	}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.s.failAt > 0 && w.b.Len()+len(p) > w.s.failAt {
		return 0, errors.New("disk on fire")
	}
	return w.b.Write(p)
}

func (w *memWriter) Close() error { w.once.Do(func() { close(w.closed) }); return nil }

func (s *memSink) last() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.bufs[len(s.bufs)-1].Bytes()...)
}

func newRec(t *testing.T, cfg Config) *Recorder {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var ttyMeta = Meta{Kind: "exec", Caller: "token#1", User: "alice", Groups: []string{"dev"}, Namespace: "a", Pod: "web-0",
	Command: []string{"sh"}, TTY: true}

func TestCastTTY(t *testing.T) {
	for _, stdin := range []bool{false, true} {
		t.Run(map[bool]string{false: "stdin-off", true: "stdin-on"}[stdin], func(t *testing.T) {
			sink := &memSink{}
			r := newRec(t, Config{Sink: sink, Cluster: "prod-1"})
			m := ttyMeta
			m.Stdin = stdin
			s, err := r.Start(context.Background(), m)
			if err != nil {
				t.Fatal(err)
			}
			s.Resize(100, 30)
			s.Output([]byte("h\xc3")) // "é" split across two reads
			s.Input([]byte("secret\r"))
			s.Output([]byte("\xa9llo \"q\"\r\n\x1b[1m"))
			s.Resize(120, 40)
			if err := s.Close(End{Exit: "130"}); err != nil {
				t.Fatal(err)
			}
			c := parseCast(t, sink.last())
			if c.header["version"] != 2.0 || c.header["width"] != 100.0 || c.header["height"] != 30.0 {
				t.Errorf("header %v: want version 2, 100x30", c.header)
			}
			if c.meta.User != "alice" || c.meta.Caller != "token#1" || c.meta.Cluster != "prod-1" || c.meta.Pod != "web-0" ||
				len(c.meta.Groups) != 1 || c.meta.Command[0] != "sh" || !c.meta.TTY || c.meta.Stdin != stdin {
				t.Errorf("meta %+v", c.meta)
			}
			if got := c.text("o"); got != "héllo \"q\"\r\n\x1b[1m" {
				t.Errorf("output %q", got)
			}
			if got := c.text("r"); got != "120x40" {
				t.Errorf("resizes %q, want 120x40 (the first is the header's)", got)
			}
			if got, want := c.text("i"), map[bool]string{true: "secret\r"}[stdin]; got != want {
				t.Errorf("stdin %q, want %q", got, want)
			}
			last := c.events[len(c.events)-1]
			if last[1] != "m" || last[2] != "exit 130" {
				t.Errorf("last event %v, want the exit marker", last)
			}
			prev := -1.0
			for _, e := range c.events {
				if e[0].(float64) < prev {
					t.Errorf("time goes back: %v", c.events)
				}
				prev = e[0].(float64)
			}
		})
	}
}

func TestCastNonTTY(t *testing.T) {
	sink := &memSink{}
	r := newRec(t, Config{Sink: sink})
	m := ttyMeta
	m.TTY = false
	s, _ := r.Start(context.Background(), m)
	s.Output([]byte("out\n"))
	s.Stderr([]byte("err\n"))
	s.Output([]byte("\xff"))
	_ = s.Close(End{Exit: "3"})
	c := parseCast(t, sink.last())
	if c.text("o") != "out\n\ufffd" || c.text("e") != "err\n" {
		t.Errorf("stdout %q stderr %q", c.text("o"), c.text("e"))
	}
	if c.header["width"] != 80.0 || c.header["env"] != nil {
		t.Errorf("header %v", c.header)
	}
}

func TestPortForwardRecord(t *testing.T) {
	sink := &memSink{}
	r := newRec(t, Config{Sink: sink})
	s, err := r.Start(context.Background(), Meta{Kind: "portforward", Caller: "token#2", Namespace: "a", Pod: "db"})
	if err != nil {
		t.Fatal(err)
	}
	s.Output([]byte("never recorded?")) // a port-forward's bytes are not events
	_ = s.Close(End{Ports: []string{"5432"}, ToPod: 10, FromPod: 20})
	lines := strings.Split(strings.TrimSpace(string(sink.last())), "\n")
	var end portForwardEnd
	if len(lines) < 2 || json.Unmarshal([]byte(lines[len(lines)-1]), &end) != nil {
		t.Fatalf("record %q", lines)
	}
	if end.ToPod != 10 || end.FromPod != 20 || end.Ports[0] != "5432" || end.Duration < 0 {
		t.Errorf("end %+v", end)
	}
	if !strings.Contains(lines[0], `"kind":"portforward"`) {
		t.Errorf("first line %q", lines[0])
	}
}

func TestBounds(t *testing.T) {
	type step struct {
		wait time.Duration
		n    int
	}
	for _, tc := range []struct {
		name      string
		cfg       Config
		steps     []step
		kept      int
		markers   []string
		dropped   map[string]float64
		failedReq bool
	}{
		{"under", Config{MaxBytes: 1000, Rate: 1000, Burst: 1000}, []step{{0, 500}}, 500, nil, nil, false},
		{"size", Config{MaxBytes: 100}, []step{{0, 60}, {0, 60}, {0, 10}}, 100,
			[]string{"size bound (100 bytes) reached"}, map[string]float64{"size": 30}, false},
		{"size-at-a-read's-end", Config{MaxBytes: 100}, []step{{0, 50}, {0, 50}, {0, 10}}, 100,
			[]string{"size bound (100 bytes) reached"}, map[string]float64{"size": 10}, false},
		{"rate", Config{Rate: 100, Burst: 100}, []step{{0, 80}, {0, 80}, {0, 80}, {time.Second, 50}}, 80 + 20 + 50,
			[]string{"rate bound (100 B/s)", "140 bytes left out (rate bound)"}, map[string]float64{"rate": 140}, false},
		{"rate-refills", Config{Rate: 100, Burst: 100}, []step{{0, 100}, {time.Second, 100}, {time.Second, 100}}, 300, nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := &memSink{}
				cfg := tc.cfg
				cfg.Sink = sink
				cfg.Metrics = NewMetrics(nil)
				r := newRec(t, cfg)
				m := ttyMeta
				m.TTY = false
				s, _ := r.Start(context.Background(), m)
				for _, st := range tc.steps {
					time.Sleep(st.wait) // the bubble's clock
					s.Output(bytes.Repeat([]byte("x"), st.n))
				}
				_ = s.Close(End{Exit: "0"})
				c := parseCast(t, sink.last())
				if got := len(c.text("o")); got != tc.kept {
					t.Errorf("kept %d bytes, want %d", got, tc.kept)
				}
				marks := c.text("m")
				for _, want := range tc.markers {
					if !strings.Contains(marks, want) {
						t.Errorf("markers %q lack %q", marks, want)
					}
				}
				for reason, want := range tc.dropped {
					if got := ops.Value(cfg.Metrics.Dropped.WithLabelValues(reason)); got != want {
						t.Errorf("dropped %s: %v, want %v", reason, got, want)
					}
				}
			})
		})
	}
}

// TestBufferBound: a sink that takes nothing never blocks the session; its
// recording keeps what fitted and says what it lost; required, the session
// is told to end.
func TestBufferBound(t *testing.T) {
	for _, required := range []bool{false, true} {
		t.Run(map[bool]string{false: "optional", true: "required"}[required], func(t *testing.T) {
			sink := &memSink{block: make(chan struct{})}
			met := NewMetrics(nil)
			r := newRec(t, Config{Sink: sink, Buffer: 4096, Required: required, Metrics: met})
			m := ttyMeta
			m.TTY = false
			s, _ := r.Start(context.Background(), m)
			chunk := bytes.Repeat([]byte("y"), 1024)
			for range 64 { // 64 KiB against a 4 KiB buffer: returns at once
				s.Output(chunk)
			}
			if got := ops.Value(met.Dropped.WithLabelValues("buffer")); got == 0 && !required {
				t.Errorf("nothing dropped for the buffer")
			}
			select {
			case <-s.Failed():
				if !required {
					t.Fatalf("optional recording failed: %v", s.Err())
				}
				if !errors.Is(s.Err(), ErrBehind) {
					t.Errorf("Err %v, want ErrBehind", s.Err())
				}
			default:
				if required {
					t.Fatal("required recording that fell behind did not fail")
				}
			}
			close(sink.block)
			err := s.Close(End{Exit: "0"})
			if required {
				if err == nil {
					t.Error("Close: nil error for a failed recording")
				}
				return
			}
			c := parseCast(t, sink.last())
			if n := len(c.text("o")); n == 0 || n >= 64*1024 {
				t.Errorf("kept %d bytes", n)
			}
			if !strings.Contains(c.text("m"), "left out (the sink fell behind)") {
				t.Errorf("no marker: %q", c.text("m"))
			}
		})
	}
}

func TestSinkFailsMidSession(t *testing.T) {
	sink := &memSink{failAt: 600}
	met := NewMetrics(nil)
	r := newRec(t, Config{Sink: sink, Required: true, Metrics: met})
	s, _ := r.Start(context.Background(), ttyMeta)
	s.Resize(80, 24)
	for range 10 {
		s.Output(bytes.Repeat([]byte("z"), 100))
	}
	<-s.Failed() // the event: nothing else tells a test when
	if !strings.Contains(s.Err().Error(), "disk on fire") {
		t.Errorf("Err %v", s.Err())
	}
	if err := s.Close(End{Exit: "0"}); err == nil {
		t.Error("Close: nil")
	}
	if ops.Value(met.SinkFailures.WithLabelValues("write")) != 1 || ops.Value(met.Refused.WithLabelValues("write")) != 1 {
		t.Error("metrics did not count the failure")
	}
}

func TestOpenFailure(t *testing.T) {
	met := NewMetrics(nil)
	r := newRec(t, Config{Sink: &memSink{openErr: errors.New("no room")}, Required: true, Metrics: met})
	_, err := r.Start(context.Background(), ttyMeta)
	var oe *OpenError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "no room") {
		t.Fatalf("Start: %v, want an *OpenError", err)
	}
	if ops.Value(met.SinkFailures.WithLabelValues("open")) != 1 || ops.Value(met.Refused.WithLabelValues("open")) != 1 {
		t.Error("metrics")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{Sink: &memSink{}}, true},
		{"no sink", Config{}, false},
		{"negative", Config{Sink: &memSink{}, Rate: -1}, false},
		{"tiny buffer", Config{Sink: &memSink{}, Buffer: 100}, false},
	} {
		cfg := tc.cfg
		err := cfg.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err == nil && (cfg.MaxBytes != DefaultMaxBytes || cfg.Rate != DefaultRate || cfg.Buffer != DefaultBuffer) {
			t.Errorf("%s: defaults not filled: %+v", tc.name, cfg)
		}
	}
}

func TestDirSinkAndLibrary(t *testing.T) {
	dir := t.TempDir()
	d := &DirSink{Dir: dir}
	r := newRec(t, Config{Sink: d})
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i, who := range []string{"alice", "bob", "alice"} {
		m := ttyMeta
		m.User, m.Pod, m.Start = who, []string{"web-0", "db-1", "web-2"}[i], t0.Add(time.Duration(i)*time.Hour)
		s, err := r.Start(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		s.Output([]byte("hi " + who))
		_ = s.Close(End{Exit: "0"})
	}
	for _, tc := range []struct {
		f    Filter
		pods []string
	}{
		{Filter{}, []string{"web-2", "db-1", "web-0"}},
		{Filter{Caller: "ALICE"}, []string{"web-2", "web-0"}},
		{Filter{Pod: "web"}, []string{"web-2", "web-0"}},
		{Filter{Since: t0.Add(time.Hour)}, []string{"web-2", "db-1"}},
		{Filter{Until: t0.Add(time.Hour)}, []string{"web-0"}},
	} {
		l, err := d.List(tc.f, 0)
		if err != nil {
			t.Fatal(err)
		}
		var pods []string
		for _, e := range l {
			pods = append(pods, e.Meta.Pod)
		}
		if strings.Join(pods, ",") != strings.Join(tc.pods, ",") {
			t.Errorf("%+v: %v, want %v", tc.f, pods, tc.pods)
		}
	}
	files, _ := os.ReadDir(dir)
	if st, _ := files[0].Info(); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}

	allow := true
	srv := httptest.NewServer(http.StripPrefix("/api", Handler(d, func(w http.ResponseWriter, r *http.Request) bool {
		if !allow {
			http.Error(w, "no", http.StatusForbidden)
		}
		return allow
	})))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/api/list?pod=db")
	var lr struct{ Recordings []Entry }
	if code != 200 || json.Unmarshal([]byte(body), &lr) != nil || len(lr.Recordings) != 1 {
		t.Fatalf("list: %d %s", code, body)
	}
	code, body = get("/api/cast/" + lr.Recordings[0].Name)
	if code != 200 || !strings.Contains(body, "hi bob") {
		t.Errorf("cast: %d %q", code, body)
	}
	for _, bad := range []string{"/api/cast/..%2fetc", "/api/cast/x.cast", "/api/list?since=yesterday"} {
		if code, _ := get(bad); code != 404 && code != 400 {
			t.Errorf("%s: %d", bad, code)
		}
	}
	allow = false
	if code, _ := get("/api/list"); code != 403 {
		t.Errorf("refused caller: %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, lr.Recordings[0].Name)); err != nil {
		t.Error(err)
	}
}

func TestHTTPSink(t *testing.T) {
	var mu sync.Mutex
	var got []string
	status := http.StatusNoContent
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Header.Get("Content-Type")+" "+r.Header.Get("Wsmux-Recording-Kind")+" "+string(b))
		st := status
		mu.Unlock()
		w.WriteHeader(st)
	}))
	defer col.Close()
	r := newRec(t, Config{Sink: &HTTPSink{URL: col.URL}})
	s, err := r.Start(context.Background(), ttyMeta)
	if err != nil {
		t.Fatal(err)
	}
	s.Output([]byte("to the collector"))
	if err := s.Close(End{Exit: "0"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(got) != 1 || !strings.HasPrefix(got[0], ContentCast+" exec {") || !strings.Contains(got[0], "to the collector") {
		t.Errorf("collector got %q", got)
	}
	status = http.StatusInternalServerError
	mu.Unlock()
	s, _ = r.Start(context.Background(), ttyMeta)
	if err := s.Close(End{Exit: "0"}); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("Close with a 500: %v", err)
	}

	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	r = newRec(t, Config{Sink: &HTTPSink{URL: url}, Required: true})
	if _, err := r.Start(context.Background(), ttyMeta); err == nil {
		t.Error("Start with a dead collector: nil error")
	}
}
