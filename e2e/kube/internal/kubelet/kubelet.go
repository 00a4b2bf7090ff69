// Package kubelet is the kubelet stand-in a real kube-apiserver proxies its
// pods' exec, attach and port-forward to, built as the kubelet is: an HTTPS
// server on the kubelet's paths (/exec/NS/POD/CONTAINER, /attach/...,
// /portForward/NS/POD) that proxies each upgrade to a CRI streaming server
// (the handlers of k8s.io/cri-streaming, which speak SPDY), and, as the
// kubelet does under ExtendWebSocketsToKubelet, first translates a v5
// WebSocket exec or attach to SPDY (k8s.io/apiserver's StreamTranslator)
// and unwraps a WebSocket port-forward tunnel (its TunnelingHandler). The
// containers are real local processes: an exec runs its command in the
// pod's folder, an attach runs cat, and a port-forward to 8080 reaches a TCP
// echo server while every other port is refused, as a pod with nothing
// listening there refuses it. Tests only: there is no container runtime on
// the machines this runs on.
package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiproxy "k8s.io/apimachinery/pkg/util/proxy"
	translator "k8s.io/apiserver/pkg/util/proxy"
	crpf "k8s.io/cri-streaming/pkg/streaming/portforward"
	crrc "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	utilexec "k8s.io/utils/exec"
)

// EchoPort is the one port of a pod that something listens on.
const EchoPort = 8080

// Kubelet is a running kubelet stand-in.
type Kubelet struct {
	// Server serves the kubelet's streaming paths over TLS (the apiserver
	// does not verify a kubelet's certificate unless told to).
	Server *httptest.Server
	// Dir is the pods' file system: every exec runs in Dir/NS/POD.
	Dir string

	cri  *httptest.Server // the CRI streaming server behind the kubelet
	echo net.Listener
	wg   sync.WaitGroup

	mu       sync.Mutex
	requests []Request
	refused  int // port-forward streams refused
}

// Request is what the kubelet saw of one request from the apiserver.
type Request struct {
	Method, Path string
	Upgrade      string   // "SPDY/3.1" or "websocket"
	Protocols    []string // the WebSocket subprotocols offered
	User         string   // an Impersonate-User that reached the kubelet (none should)
}

// Start starts a kubelet stand-in; it stops at t's cleanup.
func Start(t testing.TB) *Kubelet {
	t.Helper()
	k := &Kubelet{Dir: t.TempDir()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k.echo = ln
	k.wg.Add(1)
	go k.serveEcho()
	cri := http.NewServeMux()
	cri.HandleFunc("/cri/exec/{ns}/{pod}/{container}", k.serveExec)
	cri.HandleFunc("/cri/attach/{ns}/{pod}/{container}", k.serveAttach)
	cri.HandleFunc("/cri/portForward/{ns}/{pod}", k.servePortForward)
	k.cri = httptest.NewServer(cri)
	front := http.NewServeMux()
	front.HandleFunc("/exec/{ns}/{pod}/{container}", k.front)
	front.HandleFunc("/attach/{ns}/{pod}/{container}", k.front)
	front.HandleFunc("/portForward/{ns}/{pod}", k.front)
	k.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.requests = append(k.requests, Request{Method: r.Method, Path: r.URL.Path, Upgrade: r.Header.Get("Upgrade"),
			Protocols: r.Header.Values("Sec-Websocket-Protocol"), User: r.Header.Get("Impersonate-User")})
		k.mu.Unlock()
		front.ServeHTTP(w, r)
	}))
	k.Server.StartTLS()
	t.Cleanup(func() {
		k.Server.Close()
		k.cri.Close()
		k.echo.Close()
		k.wg.Wait()
	})
	return k
}

// Port is the port the apiserver reaches the kubelet on (the Node's
// status.daemonEndpoints.kubeletEndpoint).
func (k *Kubelet) Port() int32 {
	_, p, _ := net.SplitHostPort(k.Server.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return int32(n)
}

// Requests is every request received.
func (k *Kubelet) Requests() []Request {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Request(nil), k.requests...)
}

// front is the kubelet's handler: it proxies the upgrade to the CRI
// streaming server, translating WebSocket v5 and unwrapping the
// port-forward tunnel first as the kubelet does.
func (k *Kubelet) front(w http.ResponseWriter, r *http.Request) {
	u, _ := url.Parse(k.cri.URL + "/cri" + r.URL.Path)
	u.RawQuery = r.URL.RawQuery
	var h http.Handler = apiproxy.NewUpgradeAwareHandler(u, nil, false, true, responder{})
	switch {
	case strings.HasPrefix(r.URL.Path, "/portForward/"):
		if wsstream.IsWebSocketRequestWithTunnelingProtocol(r) {
			h = translator.NewTunnelingHandler(h)
		}
	case wsstream.IsWebSocketRequestWithStreamCloseProtocol(r):
		opts, err := crrc.NewOptions(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h = translator.NewStreamTranslatorHandler(u, nil, 0, translator.Options{
			Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY})
	}
	h.ServeHTTP(w, r)
}

type responder struct{}

func (responder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// Refused is how many port-forward streams asked for a port nothing
// listens on.
func (k *Kubelet) Refused() int { k.mu.Lock(); defer k.mu.Unlock(); return k.refused }

// PodDir is the folder pod ns/name's commands run in (created on first use).
func (k *Kubelet) PodDir(ns, pod string) string {
	d := k.Dir + "/" + ns + "/" + pod
	_ = os.MkdirAll(d, 0o700)
	return d
}

func (k *Kubelet) serveEcho() {
	defer k.wg.Done()
	for {
		c, err := k.echo.Accept()
		if err != nil {
			return
		}
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			defer c.Close()
			_, _ = io.Copy(c, c)
			_ = c.(*net.TCPConn).CloseWrite()
		}()
	}
}

const (
	idleTimeout     = 4 * time.Hour // the kubelet's default streaming-connection-idle-timeout
	creationTimeout = 30 * time.Second
)

func (k *Kubelet) serveExec(w http.ResponseWriter, r *http.Request) {
	opts, err := crrc.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ns, pod := r.PathValue("ns"), r.PathValue("pod")
	crrc.ServeExec(w, r, runtime{k: k, dir: k.PodDir(ns, pod)}, pod, "uid-"+pod, r.PathValue("container"),
		r.URL.Query()["command"], opts, idleTimeout, creationTimeout, crrc.SupportedStreamingProtocols)
}

func (k *Kubelet) serveAttach(w http.ResponseWriter, r *http.Request) {
	opts, err := crrc.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ns, pod := r.PathValue("ns"), r.PathValue("pod")
	crrc.ServeAttach(w, r, runtime{k: k, dir: k.PodDir(ns, pod)}, pod, "uid-"+pod, r.PathValue("container"),
		opts, idleTimeout, creationTimeout, crrc.SupportedStreamingProtocols)
}

func (k *Kubelet) servePortForward(w http.ResponseWriter, r *http.Request) {
	// As the kubelet does: the ports of the request (its WebSocket form
	// names them in the query; SPDY streams name their own).
	opts, err := crpf.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pod := r.PathValue("pod")
	crpf.ServePortForward(w, r, runtime{k: k}, pod, "uid-"+pod, opts, idleTimeout, creationTimeout, crpf.SupportedProtocols)
}

// runtime is the "container runtime": local processes and the echo server.
type runtime struct {
	k   *Kubelet
	dir string
}

// ExecInContainer runs cmd as a local process in the pod's folder; its exit
// status is the exec's.
func (rt runtime) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, errw io.WriteCloser, _ bool, _ <-chan crrc.TerminalSize, _ time.Duration) error {
	if len(cmd) == 0 {
		return errors.New("no command")
	}
	return run(ctx, rt.dir, cmd, in, out, errw)
}

// AttachContainer attaches to the container's main process, a cat: what
// the caller types comes back.
func (rt runtime) AttachContainer(ctx context.Context, _, _, _ string, in io.Reader, out, errw io.WriteCloser, _ bool, _ <-chan crrc.TerminalSize) error {
	return run(ctx, rt.dir, []string{"cat"}, in, out, errw)
}

func run(ctx context.Context, dir string, cmd []string, in io.Reader, out io.Writer, errw io.Writer) error {
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.Dir = dir
	if in != nil {
		c.Stdin = in
	}
	if out != nil {
		c.Stdout = out
	}
	if errw != nil {
		c.Stderr = errw
	}
	// a process that leaves stdin open (the streams' copies) ends with
	// the process: do not wait for the copies of a closed pipe forever.
	c.WaitDelay = 5 * time.Second
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return utilexec.CodeExitError{Err: err, Code: ee.ExitCode()}
	}
	return err
}

// PortForward connects stream to the pod's port: EchoPort reaches the echo
// server, every other port is refused.
func (rt runtime) PortForward(ctx context.Context, pod, _ string, port int32, stream io.ReadWriteCloser) error {
	if port != EchoPort {
		rt.k.mu.Lock()
		rt.k.refused++
		rt.k.mu.Unlock()
		return fmt.Errorf("failed to connect to localhost:%d inside the pod %q: connection refused", port, pod)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", rt.k.echo.Addr().String())
	if err != nil {
		return err
	}
	defer conn.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(conn, stream)
		_ = conn.(*net.TCPConn).CloseWrite()
	}()
	_, err = io.Copy(stream, conn)
	<-done
	return err
}
