// Package handofftest is a test client for the socket handoff: a wsmux
// exec client that does not wait for the 101 and sends its first frame
// right behind the upgrade request, so that a controller reading the
// request reads that frame too and must hand it off. Tests only; it
// imports the adapters and client-go, nothing of the gateway.
package handofftest

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"

	apihttpstream "k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/remotecommand"

	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
)

// EarlyExecutor returns a remotecommand executor for the exec URL u
// (http://HOST:PORT/api/v1/.../exec?command=...) that sends "Authorization:
// Bearer token", the WebSocket upgrade offering wsmux.v1 with
// v4.channel.k8s.io, and its session's first frame (SETTINGS) in one
// write, before any answer.
func EarlyExecutor(u *url.URL, token string) (remotecommand.Executor, error) {
	tr := &earlyTransport{addr: u.Host, token: token}
	return remotecommand.NewSPDYExecutorForProtocols(tr, tr, "POST", u, "v4.channel.k8s.io")
}

// earlyTransport answers client-go's upgrade request itself (a 101
// choosing v4.channel.k8s.io) and keeps the real request head for the
// earlyConn its upgrader makes: the executor starts its session without
// waiting for the server.
type earlyTransport struct {
	addr, token string
	head        []byte
}

func (t *earlyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	key := make([]byte, 16)
	rand.Read(key)
	t.head = fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Protocol: wsmux.v1\r\n"+
		"X-Stream-Protocol-Version: v4.channel.k8s.io\r\nAuthorization: Bearer %s\r\n\r\n",
		req.URL.RequestURI(), t.addr, base64.StdEncoding.EncodeToString(key), t.token)
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

// earlyConn's first write is the upgrade request with the session's first
// frame right behind it, in one segment; its first read consumes the 101.
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
