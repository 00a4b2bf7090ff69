package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"

	"k8s.io/apiserver/pkg/util/proxy"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway/internal/wsjoin"
	"github.com/wsmux/wsmux/gateway/ops"
)

// ProtoWebSocket labels sessions of Kubernetes' own WebSocket protocols
// (v5.channel.k8s.io exec/attach, the SPDY/3.1+portforward.k8s.io tunnel),
// which unmodified kubectl (1.31+) and client-go speak.
const ProtoWebSocket = "websocket"

const (
	v5Protocol     = "v5.channel.k8s.io"
	tunnelProtocol = "SPDY/3.1+portforward.k8s.io"
)

func isWebSocketUpgrade(r *http.Request) bool {
	for _, v := range r.Header.Values("Upgrade") {
		if strings.EqualFold(strings.TrimSpace(v), "websocket") {
			return true
		}
	}
	return false
}

func offersSubprotocol(r *http.Request, want string) bool {
	for _, v := range r.Header.Values("Sec-Websocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(p) == want {
				return true
			}
		}
	}
	return false
}

// isV5Request: kubectl's WebSocket exec/attach (since 1.30).
func isV5Request(r *http.Request) bool {
	return isWebSocketUpgrade(r) && offersSubprotocol(r, v5Protocol)
}

// isTunnelRequest: kubectl's WebSocket port-forward (SPDY inside).
func isTunnelRequest(r *http.Request) bool {
	return isWebSocketUpgrade(r) && offersSubprotocol(r, tunnelProtocol)
}

// translate serves a WebSocket exec or attach: v5.channel.k8s.io with
// k8s.io/apiserver's StreamTranslatorHandler, v4 (which that handler does
// not speak) with translateV4. The upstream leg, a SPDY client, is dialled
// in-process into the gateway's own bridge (over a net.Pipe), which opens
// the upstream session as the caller with the configured protocol (SPDY or
// wsmux), so limits, impersonation and metrics are those of every other
// session.
func (g *Gateway) translate(w http.ResponseWriter, r *http.Request, t controller.Target, rec *spliceRecord) {
	w = wsjoin.Writer(w) // wsstream cannot read fragmented messages
	if !isV5Request(r) {
		g.translateV4(w, r, t, rec)
		return
	}
	loc, tr := g.internalUpstream(r, t, rec)
	proxy.NewStreamTranslatorHandler(loc, tr, 0, streamOptions(r)).ServeHTTP(w, r)
}

// dialInternal returns a connection to a one-connection HTTP server that
// bridges the SPDY upgrade arriving on it upstream, as user.
func (g *Gateway) dialInternal(user controller.User, kind string, rec *spliceRecord) net.Conn {
	client, server := net.Pipe()
	l := &oneConnListener{conn: &notifyConn{Conn: server, closed: make(chan struct{})}}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The server closes the connection only after this returns (or
			// the bridge closes it, hijacked), so Serve has not returned
			// and rec.wg is above zero here.
			rec.wg.Add(1)
			defer rec.wg.Done()
			if !isSPDYUpgrade(r) {
				http.Error(w, "wsmux gateway: internal: want a SPDY upgrade", http.StatusBadRequest)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, user))
			if done := g.bridge(w, r, spdy.NewResponseUpgrader(), ProtoWebSocket, kind, rec); done != nil {
				rec.mu.Lock()
				rec.done = done // called by the outer session after its audit line
				rec.mu.Unlock()
			}
		}),
		ErrorLog: log.New(io.Discard, "", 0),
	}
	ops.ConnLimits{}.Apply(srv)
	srv.SetKeepAlivesEnabled(false) // one request: a refusal closes the pipe
	rec.wg.Add(1)
	go func() {
		defer rec.wg.Done()
		_ = srv.Serve(l) // returns once the connection is closed
	}()
	return client
}

// oneConnListener accepts conn once, then blocks until it is closed.
type oneConnListener struct {
	once sync.Once
	conn *notifyConn
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.conn })
	if c != nil {
		return c, nil
	}
	<-l.conn.closed
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }

type notifyConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *notifyConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.closed) })
	return err
}

// newProxy returns the handler for every request that is not a streaming
// subresource (the GET of the pod before an exec, discovery, ...): a
// reverse proxy to the cluster with the gateway's credentials, acting as
// the caller. The caller's Authorization, cookies and Impersonate-*
// headers are never passed on.
func (g *Gateway) newProxy(rt http.RoundTripper) http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(g.base)
			h := pr.Out.Header
			for k := range h {
				if strings.HasPrefix(strings.ToLower(k), "impersonate-") {
					delete(h, k)
				}
			}
			h.Del("Authorization")
			h.Del("Proxy-Authorization")
			h.Del("Cookie")
			if g.cfg.Impersonate {
				setImpersonation(h, callerOf(pr.In))
			}
		},
		Transport:     rt,
		FlushInterval: -1, // watches stream
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusUnauthorized {
				// The cluster rejected the gateway's credentials, not the
				// caller's.
				resp.Body.Close()
				return fmt.Errorf("the cluster rejected the gateway's credentials (401): check the gateway's kubeconfig")
			}
			if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests {
				// The cluster refused the caller: the gateway's log names it.
				g.logFor(resp.Request).Warn("gateway: the cluster refused a proxied request", "method", resp.Request.Method, "path", resp.Request.URL.Path, "status", resp.StatusCode)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.logFor(r).Error("gateway: proxying to the cluster failed", "remote", r.RemoteAddr, "path", r.URL.Path, "error", err)
			writeStatus(w, http.StatusBadGateway, "ServiceUnavailable", "wsmux gateway: "+err.Error())
		},
	}
}

// hijackingSPDYUpgrader is spdy's ResponseUpgrader for k8s.io/apiserver's
// TunnelingHandler, whose ResponseWriter wants the 101 written into the
// hijacked connection (as the apiserver's byte proxy does), not through
// WriteHeader, which spdy.NewResponseUpgrader uses.
type hijackingSPDYUpgrader struct{}

func (hijackingSPDYUpgrader) UpgradeResponse(w http.ResponseWriter, r *http.Request, h k8shttpstream.NewStreamHandler) k8shttpstream.Connection {
	if !isSPDYUpgrade(r) {
		http.Error(w, "wsmux gateway: internal: want a SPDY upgrade", http.StatusBadRequest)
		return nil
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "wsmux gateway: internal: cannot hijack", http.StatusInternalServerError)
		return nil
	}
	hdr := w.Header().Clone()
	conn, rw, err := hj.Hijack()
	if err != nil {
		return nil
	}
	hdr.Set("Connection", "Upgrade")
	hdr.Set("Upgrade", spdy.HeaderSpdy31)
	resp := &http.Response{StatusCode: http.StatusSwitchingProtocols, ProtoMajor: 1, ProtoMinor: 1, Header: hdr}
	var buf bytes.Buffer
	if err := resp.Write(&buf); err != nil {
		conn.Close()
		return nil
	}
	if _, err := conn.Write(buf.Bytes()); err != nil {
		conn.Close()
		return nil
	}
	var c net.Conn = conn
	if rw != nil && rw.Reader != nil { // the tunnelling handler's is nil
		c = &bufferedConn{Conn: conn, r: rw.Reader}
	}
	sc, err := spdy.NewServerConnection(c, h)
	if err != nil {
		conn.Close()
		return nil
	}
	return sc
}

// bufferedConn reads what the hijacking left buffered first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
