package webui

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/internal/testnet"
	"github.com/wsmux/wsmux/internal/tsinterop"
	"github.com/wsmux/wsmux/mux"
)

const browserToken = "browser-test-token"

// goSide records what the Go mux server of the in-page interop check saw.
type goSide struct {
	mu      sync.Mutex
	echoed  int   // streams echoed to the client's FIN (io.EOF), then half-closed
	resetBy error // what Read returned on the stream the page reset
}

func (g *goSide) serve(w http.ResponseWriter, r *http.Request) {
	sess, err := mux.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer sess.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		st, err := sess.AcceptStream(context.Background())
		if err != nil {
			return
		}
		wg.Go(func() {
			if st.Headers().Get("X-Test") == "reset" {
				// Taken: the page resets the stream once it reads this.
				_, _ = st.Write([]byte("k"))
				_, err := io.Copy(io.Discard, st)
				g.mu.Lock()
				g.resetBy = err
				g.mu.Unlock()
				return
			}
			if _, err := io.Copy(st, st); err == nil && st.CloseWrite() == nil {
				g.mu.Lock()
				g.echoed++
				g.mu.Unlock()
			}
		})
	}
}

// uiServer serves, on loopback, the web terminal in front of a gateway to a
// stand-in cluster whose pod "shell" runs local processes (on a pty with a
// TTY), and whatever extra adds.
func uiServer(tb testing.TB, extra func(*http.ServeMux)) *httptest.Server {
	tb.Helper()
	cl, err := clustertest.New(clustertest.Options{Dir: tb.TempDir(), PTY: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	g, err := gateway.New(gateway.Config{
		Auth:        auth.NewWithUsers([]auth.Token{{Token: browserToken, User: controller.User{Name: "browser-tester"}}}, nil),
		Impersonate: true, Cluster: cl.RestConfig(),
		Logger: slog.New(slog.NewTextHandler(testnet.LogWriter{T: tb}, nil)),
	})
	if err != nil {
		tb.Fatal(err)
	}
	inner := http.NewServeMux()
	if extra != nil {
		extra(inner)
	}
	inner.Handle("/", g.Handler())
	srv := httptest.NewServer(Wrap(inner))
	tb.Cleanup(srv.Close)
	return srv
}

// needBrowser returns node, the compiled script NAME and chromium's path;
// it skips (fails under CI) when one is missing.
func needBrowser(tb testing.TB, name string) (node, script, chromium string) {
	tb.Helper()
	node, script = tsinterop.NeedCompiled(tb, name)
	chromium = os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%v: .ci/run installs chromium (scripts/ci-browser.sh)", err)
		}
		tb.Skipf("%v: install Debian's chromium (bash scripts/ci-browser.sh) or set CHROMIUM", err)
	}
	return node, script, chromium
}

// TestBrowser drives the web terminal and the TS client in Debian's
// chromium, headless, through puppeteer-core (clients/ts/test/tools/browser.ts):
// the terminal of wsmux gateway against a stand-in cluster whose pod runs a
// real shell on a pseudo-terminal (echo hello, stty size after a resize,
// Ctrl-C, a pasted MiB checksummed by the shell, exit 3, reconnect, a wrong
// token's 401) and the client library in the page against a Go mux server.
// Screenshots go to the test's artifact directory (go test -artifacts).
func TestBrowser(t *testing.T) {
	node, script, chromium := needBrowser(t, "browser")
	var gs goSide
	srv := uiServer(t, func(m *http.ServeMux) { m.HandleFunc("/test/mux", gs.serve) })

	out := t.ArtifactDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, srv.URL, browserToken, out)
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
	seen := map[string]bool{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r struct {
			Name   string `json:"name"`
			OK     bool   `json:"ok"`
			Detail any    `json:"detail"`
			Error  string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Logf("browser: %s", sc.Text())
			continue
		}
		seen[r.Name] = true
		t.Run(r.Name, func(t *testing.T) {
			if !r.OK {
				t.Fatal(r.Error)
			}
			if r.Detail != "" {
				t.Log(r.Detail)
			}
		})
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	for _, name := range []string{"terminal/echo-hello", "terminal/resize-stty-size", "terminal/ctrl-c", "terminal/paste-1MiB",
		"terminal/exit-3", "terminal/reconnect", "terminal/wrong-token-401", "page/interop-go-mux", "page/no-uncaught-errors"} {
		if !seen[name] {
			t.Errorf("check %s did not run; node: %v\n%s", name, err, stderr.String())
		}
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.echoed != 16 {
		t.Errorf("Go side: %d streams echoed to their FIN, want 16", gs.echoed)
	}
	var se *mux.StreamError
	if !errors.As(gs.resetBy, &se) || se.Code != 0x1234 {
		t.Errorf("Go side: the page's reset read as %v, want code 0x1234", gs.resetBy)
	}
	if _, err := os.Stat(filepath.Join(out, "terminal.png")); err != nil {
		t.Errorf("no screenshot: %v", err)
	}
	t.Logf("screenshots in %s", out)
}
