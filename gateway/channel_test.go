package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/internal/testnet"
)

// startChannelGateway runs an impersonating gateway (plain HTTP) with the
// identities of tokenFile in front of a stand-in cluster where alice may
// use namespace a; logs go to logs.
func startChannelGateway(t *testing.T, logs io.Writer) (*Gateway, *httptest.Server) {
	t.Helper()
	cl := clustertest.Start(t)
	cl.SetRBAC(map[string][]string{"alice": {"a"}})
	toks, err := auth.ParseTokens("tokens", []byte(tokenFile))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{Auth: auth.NewWithUsers(toks, nil), Impersonate: true, Cluster: cl.RestConfig(),
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(logs, testnet.LogWriter{T: t}), nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveGateway(t, g)
	return g, srv
}

// TestClientGoWebSocketExecutorV4: client-go's WebSocket executor told to
// speak v4.channel.k8s.io only (what older clients speak) through the
// gateway: stdin reaches the command (v4 cannot close stdin, so the command
// reads a known length), stdout and stderr stay apart, exit codes come back
// as ExitErrors from the error channel's status, a TTY gets its size, and
// the cluster's 403 reaches the caller. Before v4 was accepted, these
// requests got 400.
func TestClientGoWebSocketExecutorV4(t *testing.T) {
	g, srv := startChannelGateway(t, io.Discard)
	exec := func(ctx context.Context, token, ns string, q url.Values, o remotecommand.StreamOptions) error {
		ex, err := remotecommand.NewWebSocketExecutorForProtocols(&rest.Config{Host: srv.URL, BearerToken: token}, "GET",
			srv.URL+"/api/v1/namespaces/"+ns+"/pods/web-0/exec?"+q.Encode(), v4Protocol)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return ex.StreamWithContext(ctx, o)
	}
	data := make([]byte, 1<<20)
	rand.Read(data)
	var out, errb bytes.Buffer
	q := url.Values{"command": {"head", "-c", fmt.Sprint(len(data))}, "stdin": {"true"}, "stdout": {"true"}, "stderr": {"true"}}
	if err := exec(context.Background(), "alice-token", "a", q,
		remotecommand.StreamOptions{Stdin: bytes.NewReader(data), Stdout: &out, Stderr: &errb}); err != nil {
		t.Fatal(err)
	}
	if sum(out.Bytes()) != sum(data) || errb.Len() != 0 {
		t.Fatalf("head -c: %d bytes back of %d (stderr %q)", out.Len(), len(data), errb.String())
	}

	out.Reset()
	q = url.Values{"command": {"sh", "-c", "echo o; echo e >&2; exit 5"}, "stdout": {"true"}, "stderr": {"true"}}
	err := exec(context.Background(), "alice-token", "a", q, remotecommand.StreamOptions{Stdout: &out, Stderr: &errb})
	var ee utilexec.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 5 || out.String() != "o\n" || errb.String() != "e\n" {
		t.Fatalf("exit 5: %v, stdout %q, stderr %q", err, out.String(), errb.String())
	}

	// A TTY: the size reaches the container, typed text comes back (v4
	// has no stdin close: the command reads 5 bytes and exits).
	sz := sizes{ch: make(chan *remotecommand.TerminalSize, 1)}
	sz.ch <- &remotecommand.TerminalSize{Width: 120, Height: 40}
	close(sz.ch)
	out.Reset()
	err = exec(context.Background(), "alice-token", "a", url.Values{"command": {"tty", "5"}, "stdin": {"true"}, "stdout": {"true"}, "tty": {"true"}},
		remotecommand.StreamOptions{Stdin: strings.NewReader("typed"), Stdout: &out, Tty: true, TerminalSizeQueue: sz})
	if err != nil || out.String() != "size 120x40\ntyped" {
		t.Fatalf("tty: %v, stdout %q", err, out.String())
	}

	err = exec(context.Background(), "bob-token", "a", url.Values{"command": {"cat"}, "stdout": {"true"}}, remotecommand.StreamOptions{Stdout: &out})
	if err == nil || !strings.Contains(err.Error(), `User "bob" cannot`) {
		t.Fatalf("bob: %v, want the cluster's 403", err)
	}
	// Three sessions reached the cluster (bob's was refused there).
	if v := ops.Value(g.Metrics().Upgrades.WithLabelValues(ProtoWebSocket, "exec")); v != 3 {
		t.Errorf("websocket exec sessions %v, want 3", v)
	}
}

// TestV4ChannelProtocolRaw: a raw WebSocket client of each v4 variant
// (binary, and base64 in text messages) sees the protocol as the kubelet
// speaks it: the subprotocol it asked for, an empty first message on
// stdout, stdout and stderr on their channels, and the exit status as a
// metav1.Status JSON on the error channel; the audit line has the exit
// code. A client offering v5 and v4 gets v5.
func TestV4ChannelProtocolRaw(t *testing.T) {
	var logs testnet.Buffer
	g, srv := startChannelGateway(t, &logs)
	q := url.Values{"command": {"sh", "-c", "printf out; printf err >&2; exit 3"}, "stdout": {"true"}, "stderr": {"true"}}
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/api/v1/namespaces/a/pods/web-0/exec?" + q.Encode()
	for _, tc := range []struct {
		offer  []string
		want   string
		base64 bool
	}{
		{[]string{v4Protocol}, v4Protocol, false},
		{[]string{v4Base64Protocol}, v4Base64Protocol, true},
		{[]string{v5Protocol, v4Protocol}, v5Protocol, false},
	} {
		t.Run(strings.Join(tc.offer, ","), func(t *testing.T) {
			d := websocket.Dialer{Subprotocols: tc.offer, HandshakeTimeout: 10 * time.Second}
			c, resp, err := d.Dial(u, http.Header{"Authorization": {"Bearer alice-token"}})
			if err != nil {
				t.Fatalf("dial: %v (%v)", err, resp)
			}
			defer c.Close()
			if c.Subprotocol() != tc.want {
				t.Fatalf("negotiated %q, want %q", c.Subprotocol(), tc.want)
			}
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			var got [4]bytes.Buffer
			var first []byte
			for n := 0; ; n++ {
				typ, m, err := c.ReadMessage()
				if err != nil {
					break // the gateway closes after the status
				}
				if tc.base64 {
					if typ != websocket.TextMessage || len(m) == 0 {
						t.Fatalf("message %d: type %d, want text", n, typ)
					}
					p, err := base64.StdEncoding.DecodeString(string(m[1:]))
					if err != nil {
						t.Fatalf("message %d: %v", n, err)
					}
					m = append([]byte{m[0] - '0'}, p...)
				}
				if len(m) == 0 || int(m[0]) >= len(got) {
					t.Fatalf("message %d: %q", n, m)
				}
				if n == 0 {
					first = m
				}
				got[m[0]].Write(m[1:])
			}
			if !bytes.Equal(first, []byte{chanStdout}) {
				t.Errorf("first message %q, want an empty one on stdout", first)
			}
			if got[chanStdout].String() != "out" || got[chanStderr].String() != "err" {
				t.Errorf("stdout %q, stderr %q", got[chanStdout].String(), got[chanStderr].String())
			}
			var st metav1.Status
			if err := json.Unmarshal(got[chanError].Bytes(), &st); err != nil {
				t.Fatalf("error channel %q: %v", got[chanError].String(), err)
			}
			if st.Status != metav1.StatusFailure || st.Reason != "NonZeroExitCode" || st.Details == nil ||
				len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != "ExitCode" || st.Details.Causes[0].Message != "3" {
				t.Errorf("status %s", got[chanError].String())
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g.Metrics().Sessions.Drain(ctx)
	ended := regexp.MustCompile(`session ended.* user=alice .*protocol=websocket .*exit=3`).FindAllString(logs.String(), -1)
	if len(ended) != 3 {
		t.Errorf("%d audit lines with exit=3, want 3:\n%s", len(ended), logs.String())
	}
}
