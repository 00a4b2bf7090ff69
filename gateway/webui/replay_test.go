package webui

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/recording"
	"github.com/wsmux/wsmux/internal/testnet"
)

// recordingServer serves, over TLS, the web UI in front of a gateway that
// records every session into a directory, to a stand-in cluster whose pod
// runs a shell on a pseudo-terminal; browser-tester may audit, viewer may
// not.
func recordingServer(t *testing.T) (*httptest.Server, *testnet.Kubectl, chan struct{}) {
	t.Helper()
	cl, err := clustertest.New(clustertest.Options{Dir: t.TempDir(), PTY: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	policy := &recording.PolicyStore{}
	p, err := recording.ParsePolicy([]byte("sessions:\n- users: ['*']\nauditors:\n  users: [browser-tester]\n"))
	if err != nil {
		t.Fatal(err)
	}
	policy.Set(p)
	done := make(chan struct{}, 4)
	rec, err := recording.New(recording.Config{Sink: &closeNotifier{DirSink: recording.DirSink{Dir: t.TempDir()}, closed: done}, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Config{
		Auth: auth.NewWithUsers([]auth.Token{
			{Token: browserToken, User: controller.User{Name: "browser-tester"}},
			{Token: "viewer-token", User: controller.User{Name: "viewer"}},
		}, nil),
		Impersonate: true, Cluster: cl.RestConfig(), Recording: rec,
		Logger: slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(Wrap(g.Handler()))
	t.Cleanup(srv.Close)
	k := testnet.NewKubectl(t, srv.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	return srv, k, done
}

// closeNotifier is a DirSink that says when a recording is complete.
type closeNotifier struct {
	recording.DirSink
	closed chan struct{}
}

type notifyingFile struct {
	io.WriteCloser
	closed chan struct{}
}

func (c *closeNotifier) Open(ctx context.Context, m recording.Meta) (io.WriteCloser, error) {
	w, err := c.DirSink.Open(ctx, m)
	if err != nil {
		return nil, err
	}
	return &notifyingFile{WriteCloser: w, closed: c.closed}, nil
}

func (f *notifyingFile) Close() error {
	err := f.WriteCloser.Close()
	f.closed <- struct{}{}
	return err
}

// TestRecordingReplay: an interactive kubectl session (typed input, a
// resize, Ctrl-C, exit code 3) through the gateway is recorded; the replay
// page lists it (filters by caller, pod and time), plays it with
// asciinema-player in Chromium, and the screen after the replay is the
// screen the client saw (its terminal's bytes in xterm.js), but for the
// line kubectl itself printed after the session. Callers the policy does
// not let audit get 403.
func TestRecordingReplay(t *testing.T) {
	node, script, chromium := needBrowser(t, "replay")
	srv, k, done := recordingServer(t)
	client, code := testnet.InteractiveSession(t, k, browserToken, nil)
	if code != testnet.InteractiveExit {
		t.Fatalf("kubectl exit code %d, want %d; terminal %q", code, testnet.InteractiveExit, client)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the recording did not complete")
	}

	// The API refuses callers who may not audit.
	hc := srv.Client()
	for tok, want := range map[string]int{"viewer-token": http.StatusForbidden, "": http.StatusUnauthorized, browserToken: http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+gateway.RecordingsAPI+"list", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("token %q: %d %s, want %d", tok, resp.StatusCode, b, want)
		}
	}

	out := t.ArtifactDir()
	clientFile := filepath.Join(out, "client-terminal.bin")
	if err := os.WriteFile(clientFile, client, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, srv.URL, browserToken, out, clientFile, "100", "30")
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	screens := map[string][]string{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r struct {
			Name   string          `json:"name"`
			OK     bool            `json:"ok"`
			Detail json.RawMessage `json:"detail"`
			Error  string          `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Logf("browser: %s", sc.Text())
			continue
		}
		seen[r.Name] = true
		var lines []string
		if json.Unmarshal(r.Detail, &lines) == nil {
			screens[r.Name] = lines
		}
		t.Run(r.Name, func(t *testing.T) {
			if !r.OK {
				t.Fatal(r.Error)
			}
			t.Logf("%s", r.Detail)
		})
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	for _, name := range []string{"replay/wrong-token-401", "replay/list-filters", "replay/play", "replay/client-screen", "replay/no-uncaught-errors"} {
		if !seen[name] {
			t.Errorf("check %s did not run; node: %v\n%s", name, err, stderr.String())
		}
	}
	replay, clientScreen := screens["replay/play"], screens["replay/client-screen"]
	// kubectl's own last words are not the session's.
	want := append(append([]string(nil), replay...), "command terminated with exit code 3")
	if len(replay) == 0 || strings.Join(clientScreen, "\n") != strings.Join(want, "\n") {
		t.Errorf("screens differ:\nafter the replay:\n%s\nthe client's:\n%s", strings.Join(replay, "\n"), strings.Join(clientScreen, "\n"))
	}
	for _, w := range []string{"hello-42", "30 100", "after-5", "rec> exit 3"} {
		if !strings.Contains(strings.Join(replay, "\n"), w) {
			t.Errorf("the replay's screen lacks %q", w)
		}
	}
}
