package conformance_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/wsmux/wsmux/conformance"
	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux"
)

const token = "conformance-token"

// echo serves a stream: every byte back, then a half-close after EOF.
// Once the runner stops reading (STOP_SENDING: the writes fail) it keeps
// reading, discarding, until the runner's FIN, as --echo promises.
func echo(st *mux.Stream) {
	if _, err := io.Copy(st, st); err != nil {
		_, _ = io.Copy(io.Discard, st)
	}
	_ = st.CloseWrite()
}

// muxServer is a mux.Upgrade server whose application accepts and echoes
// every stream.
func muxServer(t *testing.T, cfg *mux.Config) string {
	t.Helper()
	var wg sync.WaitGroup
	// httptest's Close does not wait for handlers whose connection was
	// hijacked: a session upgraded while the cleanup runs must not start
	// (an Add from zero racing with Wait).
	var mu sync.Mutex
	closed := false
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, err := mux.Upgrade(w, r, cfg)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if closed {
			_ = sess.Close()
			return
		}
		wg.Go(func() {
			defer sess.Close()
			for {
				st, err := sess.AcceptStream(context.Background())
				if err != nil {
					return
				}
				wg.Go(func() { echo(st) })
			}
		})
	}))
	t.Cleanup(func() {
		hs.Close()
		mu.Lock()
		closed = true
		mu.Unlock()
		wg.Wait()
	})
	return "ws" + strings.TrimPrefix(hs.URL, "http") + "/mux"
}

// run plays the conversations selected by only (all when empty) and
// returns the summary and the report.
func run(t *testing.T, o conformance.Options, only string) (*conformance.Summary, string) {
	t.Helper()
	var out bytes.Buffer
	o.Out = &out
	if only != "" {
		o.Run = regexp.MustCompile(only)
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	sum, err := conformance.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	return sum, out.String()
}

// mustPass fails the test on any FAIL and when fewer than min checks passed.
func mustPass(t *testing.T, sum *conformance.Summary, report string, minPass int) {
	t.Helper()
	if sum.Fail > 0 || sum.Pass < minPass {
		t.Fatalf("%d failed, %d passed (want >= %d):\n%s", sum.Fail, sum.Pass, minPass, report)
	}
	t.Logf("%d passed, %d skipped; sections %v", sum.Pass, sum.Skip, sum.Sections)
}

func TestConformanceMuxUpgradeServer(t *testing.T) {
	url := muxServer(t, nil)
	sum, report := run(t, conformance.Options{URL: url, Echo: true}, "")
	mustPass(t, sum, report, 70)
}

// TestConformanceResume: against a server with resumption on, the
// resumption checks pass (negotiation, 404 for an unknown token, 409 for
// a count out of range, 4 MiB echoed across a TCP reset); against one
// without, they are SKIP with the reason.
func TestConformanceResume(t *testing.T) {
	url := muxServer(t, &mux.Config{Resume: true, ResumeRegistry: &mux.ResumeRegistry{}})
	sum, report := run(t, conformance.Options{URL: url, Echo: true, Run: regexp.MustCompile("^resume-")}, "")
	if sum.Pass != 4 || sum.Fail != 0 {
		t.Fatalf("%d passed, %d failed, want 4 and 0:\n%s", sum.Pass, sum.Fail, report)
	}
	url = muxServer(t, nil)
	sum, report = run(t, conformance.Options{URL: url, Echo: true, Run: regexp.MustCompile("^resume-")}, "")
	if sum.Skip != 4 || !strings.Contains(report, "does not negotiate RESUME") {
		t.Fatalf("%d skipped, want 4 with the reason:\n%s", sum.Skip, report)
	}
}

// TestConformanceSmallWindows runs the checks that depend on the peer's
// settings against a server whose windows fit in one message (so the
// session window can be crossed) and, with short timers, the slow checks.
func TestConformanceSmallWindows(t *testing.T) {
	url := muxServer(t, &mux.Config{
		InitialStreamWindow:  64 << 10,
		InitialSessionWindow: 160 << 10,
		MaxFramePayload:      4096,
		MaxHeaderBytes:       2048,
		MaxStreams:           5,
		SettingsTimeout:      200 * time.Millisecond,
		ReadTimeout:          200 * time.Millisecond,
		KeepAliveInterval:    200 * time.Millisecond,
		KeepAliveTimeout:     5 * time.Second,
	})
	sum, report := run(t, conformance.Options{URL: url, Echo: true, Slow: true}, "")
	mustPass(t, sum, report, 75)
	for _, r := range sum.Results {
		if r.Status == "SKIP" && r.Name != "handshake-refuses-other-subprotocol" && !strings.HasPrefix(r.Name, "resume-") {
			t.Errorf("%s skipped: %s", r.Name, r.Detail)
		}
	}
}

// TestConformanceMuxClient runs the runner as a server for a mux client
// that redials after every session and echoes the streams it accepts.
func TestConformanceMuxClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	echoClient(t, ln, false, nil)
	sum, report := run(t, conformance.Options{Listener: ln, Echo: true, AcceptTimeout: 10 * time.Second}, "")
	_ = ln.Close()
	mustPass(t, sum, report, 70)
}

func TestLoadRejectsUnknownFields(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"unknown field", `{"version":1,"conversations":[{"name":"x","steps":[{"sned":{}}]}]}`},
		{"version", `{"version":2,"conversations":[]}`},
		{"syntax", `{"version":1,`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := conformance.Load([]byte(tc.in)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestRunNoServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = conformance.Run(context.Background(), conformance.Options{URL: "ws://" + addr + "/", Timeout: time.Second})
	var ne net.Error
	var oe *net.OpError
	if err == nil || !(errors.As(err, &oe) || errors.As(err, &ne)) {
		t.Fatalf("err = %v, want a dial error", err)
	}
}

// lenientServer is a scripted fake WSMUX/1 server that breaks two rules
// on purpose: it sends its SETTINGS, answers PINGs and ACKs every SYN, and
// accepts everything else, including DATA past its window and reused
// stream ids.
func lenientServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				u := ws.Upgrader{Protocol: func(p []byte) bool { return string(p) == conformance.Subprotocol }}
				if _, err := u.Upgrade(c); err != nil {
					return
				}
				var set frame.Settings
				_ = wsutil.WriteServerBinary(c, frame.AppendSettings(nil, &set))
				for {
					msg, op, err := wsutil.ReadClientData(c)
					if err != nil || op != ws.OpBinary {
						return
					}
					var out []byte
					var it frame.Iterator
					it.Reset(msg, frame.DefaultLimits())
					for it.Next() {
						f := it.Frame()
						switch {
						case f.Type == frame.TypePing && !f.Flags.Has(frame.FlagACK):
							out = frame.AppendPing(out, true, f.Arg)
						case f.Type == frame.TypeHeaders && f.Flags.Has(frame.FlagSYN):
							out, _ = frame.AppendHeadersBlock(out, f.StreamID, frame.FlagACK, nil)
						}
					}
					if len(out) > 0 {
						_ = wsutil.WriteServerBinary(c, out)
					}
				}
			})
		}
	})
	return "ws://" + ln.Addr().String() + "/"
}

// TestRunnerNamesTheBrokenRule: against a server that accepts DATA past
// its window and a reused stream id, the runner fails exactly those checks,
// naming their sections, and passes the PING check the server does keep.
func TestRunnerNamesTheBrokenRule(t *testing.T) {
	sum, report := run(t, conformance.Options{URL: lenientServer(t), Timeout: 3 * time.Second}, "^(data-past-stream-window|syn-reused-id|ping-ack)$")
	want := map[string]string{"data-past-stream-window": "FAIL 8.3", "syn-reused-id": "FAIL 7.1", "ping-ack": "PASS 4.6"}
	for _, r := range sum.Results {
		if got := r.Status + " " + r.Section; got != want[r.Name] {
			t.Errorf("%s: %s, want %s", r.Name, got, want[r.Name])
		}
		if r.Status == "FAIL" && !strings.Contains(r.Detail, "accepted what it must reject") {
			t.Errorf("%s: detail %q", r.Name, r.Detail)
		}
	}
	if len(sum.Results) != 3 || !strings.Contains(report, "FAIL §8.3") {
		t.Fatalf("report:\n%s", report)
	}
}

// echoClient dials ln's runner (resuming its sessions when resume is set),
// echoes the streams it accepts and dials again after every session. dial,
// when set, says whether the n-th TCP dial (from 1) may connect; a refused
// one waits for the test's end.
func echoClient(t *testing.T, ln net.Listener, resume bool, dial func(n int) bool) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var mu sync.Mutex
	dials := 0
	d := mux.Dialer{
		Config: &mux.Config{Resume: resume, ResumeTimeout: 3 * time.Second},
		NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dials++
			n := dials
			mu.Unlock()
			if dial != nil && !dial(n) {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			var nd net.Dialer
			return nd.DialContext(ctx, network, addr)
		},
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			sess, err := d.Dial(ctx, "ws://"+ln.Addr().String()+"/")
			if err != nil {
				continue // the runner has closed the listener, or refused this one
			}
			for {
				st, err := sess.AcceptStream(ctx)
				if err != nil {
					break
				}
				wg.Go(func() { echo(st) })
			}
			_ = sess.Close()
		}
	})
}

// TestConformanceResumeClient: the runner as a server (--listen) checks a
// client's resumption: a mux client with resumption on offers RESUME and,
// after the runner resets the connection mid-echo, resumes with its token
// and echoes all 4 MiB; one without resumption gets both checks SKIP with
// the reason; one whose redial never reaches the runner fails the second.
func TestConformanceResumeClient(t *testing.T) {
	listen := func(t *testing.T) net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln
	}
	t.Run("resumes", func(t *testing.T) {
		ln := listen(t)
		echoClient(t, ln, true, nil)
		sum, report := run(t, conformance.Options{Listener: ln, Echo: true, AcceptTimeout: 10 * time.Second}, "^resume-")
		if sum.Pass != 2 || sum.Fail != 0 || sum.Skip != 0 {
			t.Fatalf("%d passed, %d failed, %d skipped, want 2, 0, 0:\n%s", sum.Pass, sum.Fail, sum.Skip, report)
		}
		t.Log(report)
	})
	t.Run("no resumption", func(t *testing.T) {
		ln := listen(t)
		echoClient(t, ln, false, nil)
		sum, report := run(t, conformance.Options{Listener: ln, Echo: true, AcceptTimeout: 10 * time.Second}, "^resume-")
		if sum.Skip != 2 || sum.Fail != 0 || !strings.Contains(report, "does not negotiate RESUME") {
			t.Fatalf("%d skipped, %d failed, want 2 skipped with the reason:\n%s", sum.Skip, sum.Fail, report)
		}
	})
	t.Run("redial lost", func(t *testing.T) {
		ln := listen(t)
		echoClient(t, ln, true, func(n int) bool { return n <= 2 }) // the offer's session, the cut one
		sum, report := run(t, conformance.Options{Listener: ln, Echo: true, AcceptTimeout: 10 * time.Second, Timeout: 2 * time.Second}, "^resume-")
		if sum.Pass != 1 || sum.Fail != 1 || !strings.Contains(report, "cut: true") {
			t.Fatalf("%d passed, %d failed, want 1 and 1 (after the cut):\n%s", sum.Pass, sum.Fail, report)
		}
		t.Log(report)
	})
}
