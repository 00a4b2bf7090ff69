//go:build linux

package handoff

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/remotecommand"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway/handoff/handofftest"
)

// TestHandoffKeepsBytesAlreadyRead: the client sends its first wsmux
// frame right behind the upgrade request; the controller reads both in
// one read and hands off everything it read. The session works (without
// the frame the gateway would wait for the client's SETTINGS and fail).
func TestHandoffKeepsBytesAlreadyRead(t *testing.T) {
	e := start(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	extra := make(chan int, 1)
	go func() { // a raw controller: read the head (and what follows), hand off
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var got []byte
		buf := make([]byte, 64<<10)
		for !bytes.Contains(got, []byte("\r\n\r\n")) {
			n, err := c.Read(buf)
			if err != nil {
				extra <- -1
				return
			}
			got = append(got, buf[:n]...)
		}
		head, _, _ := bytes.Cut(got, []byte("\r\n\r\n"))
		extra <- len(got) - len(head) - 4
		err = controller.Handoff(context.Background(), e.s.Addr(), c.(*net.TCPConn), controller.HandoffMessage{
			User:   controller.User{Name: "alice"},
			Target: controller.Target{Namespace: "default", Pod: "web-0", Subresource: "exec", Command: []string{"cat"}},
			Data:   got,
		})
		if err != nil {
			t.Errorf("handoff: %v", err)
		}
	}()
	u := mustParse(t, "http://"+ln.Addr().String()+"/api/v1/namespaces/default/pods/web-0/exec?command=cat&stdin=true&stdout=true&stderr=true")
	ex, err := handofftest.EarlyExecutor(u, ctlToken)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 256<<10)
	rand.Read(data)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: bytes.NewReader(data), Stdout: &out, Stderr: io.Discard})
	n := <-extra
	if n <= 0 {
		t.Fatalf("the controller read %d bytes past the request head: the test did not send its frame early", n)
	}
	t.Logf("the controller read %d bytes past the request head and handed them off", n)
	if err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("exec: %d of %d bytes back, %v", out.Len(), len(data), err)
	}
	if !strings.Contains(e.logs.String(), "bytes_already_read=") {
		t.Error("the handoff's log line lacks bytes_already_read")
	}
}
