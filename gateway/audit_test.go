package gateway

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/kubeclient"
	"github.com/wsmux/wsmux/internal/testnet"
)

// TestAuditLine: one line per session ends it with who, what, the bytes
// each way and the exit status, whatever the caller's protocol.
func TestAuditLine(t *testing.T) {
	cl := clustertest.Start(t)
	var logs testnet.Buffer
	toks, _ := auth.ParseTokens("t", []byte("tok,alice,,dev\n"))
	g, err := New(Config{Auth: auth.NewWithUsers(toks, nil), Impersonate: true, Cluster: cl.RestConfig(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveGateway(t, g)
	// wsmux: cat of 5 bytes; then "bye" back and exit 7.
	var out bytes.Buffer
	o := kubeclient.Options{Server: srv.URL, Token: "tok"}
	if err := kubeclient.Exec(context.Background(), o, kubeclient.ExecOptions{
		Namespace: "ns", Pod: "p", Command: []string{"cat"}, Stdin: strings.NewReader("12345"), Stdout: &out,
	}); err != nil {
		t.Fatal(err)
	}
	_ = kubeclient.Exec(context.Background(), o, kubeclient.ExecOptions{
		Namespace: "ns", Pod: "p", Command: []string{"exit", "7"}, Stdout: &out,
	})
	// v5 WebSocket: cat of 11 bytes, success.
	ex, err := remotecommand.NewWebSocketExecutor(&rest.Config{Host: srv.URL, BearerToken: "tok"}, "GET",
		srv.URL+"/api/v1/namespaces/ns/pods/q/exec?command=cat&stdin=true&stdout=true")
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: strings.NewReader("hello audit"), Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	// Every session has ended: each unregisters right after its audit
	// line, so the drain finishes at once. (A v5 session that stayed
	// registered made this wait out the deadline, and the cleanup's drain
	// after it: 30 s, and the test passed; it fails now.)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !g.Metrics().Sessions.Drain(ctx) {
		t.Errorf("a session was still registered after every caller had finished:\n%s", logs.String())
	}
	if testing.Verbose() {
		t.Log(logs.String())
	}
	var ended []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "session ended") {
			ended = append(ended, l)
		}
	}
	if len(ended) != 3 {
		t.Fatalf("%d session-ended lines:\n%s", len(ended), logs.String())
	}
	for i, want := range []string{
		`caller=token#1 user=alice namespace=ns pod=p subresource=exec protocol=wsmux command=\[cat\].* bytes_from_caller=5 bytes_to_caller=\d+ exit=0`,
		`caller=token#1 user=alice namespace=ns pod=p subresource=exec protocol=wsmux command="\[exit 7\]".* bytes_from_caller=0 bytes_to_caller=\d+ exit=7`,
		`user=alice namespace=ns pod=q subresource=exec protocol=websocket command=\[cat\].* bytes_from_caller=11 bytes_to_caller=\d+ exit=0`,
	} {
		if !regexp.MustCompile(want).MatchString(ended[i]) {
			t.Errorf("audit line %d:\n%s\nwant /%s/", i, ended[i], want)
		}
	}
}
