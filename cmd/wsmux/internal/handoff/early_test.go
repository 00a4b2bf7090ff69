//go:build linux

package handoff

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	apihttpstream "k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/remotecommand"

	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	"github.com/wsmux/wsmux/controller"
)

// earlyConn is a client that does not wait for the 101: its first write
// is the upgrade request with the session's first frame (SETTINGS) right
// behind it, in one segment; its first read consumes the 101.
type earlyConn struct {
	net.Conn
	head  []byte
	wmu   sync.Mutex
	rOnce sync.Once
	br    *bufio.Reader
	rerr  error
}

func (c *earlyConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.head != nil {
		b := append(c.head, p...)
		c.head = nil
		if _, err := c.Conn.Write(b); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *earlyConn) Read(p []byte) (int, error) {
	c.rOnce.Do(func() {
		c.br = bufio.NewReader(c.Conn)
		resp, err := http.ReadResponse(c.br, nil)
		if err == nil && resp.StatusCode != http.StatusSwitchingProtocols {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			err = fmt.Errorf("upgrade refused: %s: %s", resp.Status, b)
		}
		c.rerr = err
	})
	if c.rerr != nil {
		return 0, c.rerr
	}
	return c.br.Read(p)
}

// earlyTransport answers client-go's upgrade request itself (a 101
// choosing v4.channel.k8s.io) and keeps the real request head for the
// earlyConn the upgrader makes: the executor starts its session without
// waiting for the server.
type earlyTransport struct {
	addr string
	head []byte
}

func (t *earlyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	key := make([]byte, 16)
	rand.Read(key)
	t.head = fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Protocol: wsmux.v1\r\n"+
		"X-Stream-Protocol-Version: v4.channel.k8s.io\r\nAuthorization: Bearer %s\r\n\r\n",
		req.URL.RequestURI(), t.addr, base64.StdEncoding.EncodeToString(key), ctlToken)
	return &http.Response{StatusCode: http.StatusSwitchingProtocols, Body: http.NoBody, Request: req,
		Header: http.Header{"X-Stream-Protocol-Version": {"v4.channel.k8s.io"}}}, nil
}

func (t *earlyTransport) NewConnection(*http.Response) (apihttpstream.Connection, error) {
	c, err := net.Dial("tcp", t.addr)
	if err != nil {
		return nil, err
	}
	return wsmuxhttpstream.NewClientConnection(&earlyConn{Conn: c, head: t.head})
}

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
	tr := &earlyTransport{addr: ln.Addr().String()}
	u := mustParse(t, "http://"+tr.addr+"/api/v1/namespaces/default/pods/web-0/exec?command=cat&stdin=true&stdout=true&stderr=true")
	ex, err := remotecommand.NewSPDYExecutorForProtocols(tr, tr, "POST", u, "v4.channel.k8s.io")
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
