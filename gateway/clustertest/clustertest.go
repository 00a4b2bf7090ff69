// Package clustertest is a stand-in cluster, like net/http/httptest's
// servers: the real SPDY streaming handlers of k8s.io/cri-streaming (the
// kubelet's) behind the apiserver's pod subresource paths, with a
// bearer-token check standing in for the apiserver's authentication, a tiny
// RBAC and impersonation check, and a Go-only runtime. The gateway's tests,
// its Example and `wsmux demo` run against it.
//
// Tests, examples and `wsmux demo` only: it imports testing, client-go and the kubelet's
// streaming handlers, and must not import mux or the adapters (it stands for
// the cluster, which knows no wsmux).
package clustertest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	crpf "k8s.io/cri-streaming/pkg/streaming/portforward"
	crrc "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// Token is the bearer token the cluster accepts.
const Token = "cluster-secret"

// Cluster is a running stand-in cluster.
type Cluster struct {
	Server   *httptest.Server
	echoAddr string
	echo     net.Listener
	forward  func(pod string, port int32) string
	pty      bool
	wg       sync.WaitGroup
	// Dir is where commands other than the built-in ones run as local
	// processes (kubectl cp's tar, for one); "" is the current directory.
	Dir string

	mu       sync.Mutex
	requests int      // authenticated upgrade requests
	authSeen []string // every Authorization header received
	resizes  []crrc.TerminalSize
	rbac     map[string][]string // subject -> namespaces; nil: all allowed
	imps     []Impersonation
}

// Impersonation is the Impersonate-* headers of one request (none: the
// request acted as the gateway itself).
type Impersonation struct {
	User, UID string
	Groups    []string
	Path      string
}

// SetRBAC installs a tiny RBAC: impersonated requests are allowed in the
// namespaces listed for their user ("alice") or one of their groups
// ("group:dev"); "*" allows every namespace. Requests without
// impersonation act as the gateway, which may do everything.
func (c *Cluster) SetRBAC(rules map[string][]string) {
	c.mu.Lock()
	c.rbac = rules
	c.mu.Unlock()
}

// Impersonations returns the Impersonate-* headers of every authenticated
// request, in order.
func (c *Cluster) Impersonations() []Impersonation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Impersonation(nil), c.imps...)
}

// authorize records r's impersonation and decides it; the reason is the
// apiserver's kind of message for a denial.
func (c *Cluster) authorize(r *http.Request, ns, resource string) (bool, string) {
	im := Impersonation{User: r.Header.Get("Impersonate-User"), UID: r.Header.Get("Impersonate-Uid"),
		Groups: r.Header.Values("Impersonate-Group"), Path: r.URL.Path}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.imps = append(c.imps, im)
	if im.User == "" && (im.UID != "" || len(im.Groups) > 0) {
		return false, "requested impersonation of groups or uid without impersonating a user"
	}
	if im.User == "" || c.rbac == nil {
		return true, ""
	}
	subjects := []string{im.User}
	for _, g := range im.Groups {
		subjects = append(subjects, "group:"+g)
	}
	for _, s := range subjects {
		for _, n := range c.rbac[s] {
			if n == "*" || n == ns {
				return true, ""
			}
		}
	}
	return false, fmt.Sprintf("User %q cannot get resource %q in API group \"\" in the namespace %q", im.User, resource, ns)
}

// forbidden answers 403 with a metav1.Status, as the apiserver does.
func forbidden(w http.ResponseWriter, name, resource, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	b, _ := json.Marshal(map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{}, "status": "Failure",
		"message": fmt.Sprintf("%s %q is forbidden: %s", resource, name, reason),
		"reason":  "Forbidden", "details": map[string]any{"name": name, "kind": resource}, "code": 403,
	})
	_, _ = w.Write(b)
}

// Stats returns how many authenticated upgrade requests arrived and every
// Authorization header seen.
func (c *Cluster) Stats() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests, append([]string(nil), c.authSeen...)
}

// Start starts a cluster (and the echo server port-forwards reach); both
// stop at t's cleanup. Exec runs Go "commands" (see runtime).
func Start(t testing.TB) *Cluster {
	t.Helper()
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Options configure New.
type Options struct {
	// Forward returns the address a port-forward to a pod's port dials
	// ("" or nil: the built-in TCP echo server).
	Forward func(pod string, port int32) string
	// Dir is Cluster.Dir.
	Dir string
	// Addr is where the apiserver listens ("": 127.0.0.1, any port).
	Addr string
	// PTY runs TTY sessions of local processes on a pseudo-terminal.
	PTY bool
}

// New starts a cluster (an HTTPS stand-in apiserver on loopback and the
// echo server port-forwards reach); Close stops both.
func New(o Options) (*Cluster, error) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &Cluster{echoAddr: echo.Addr().String(), echo: echo, forward: o.Forward, Dir: o.Dir, pty: o.PTY}
	c.wg.Add(1)
	go c.serveEcho()
	h := func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.authSeen = append(c.authSeen, r.Header.Get("Authorization"))
		ok := r.Header.Get("Authorization") == "Bearer "+Token
		if ok {
			c.requests++
		}
		c.mu.Unlock()
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if serveDiscovery(w, r) {
			return
		}
		// /api/v1/namespaces/{ns}/pods/{pod}[/{subresource}]
		p := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if len(p) < 6 || len(p) > 7 || p[0] != "api" || p[1] != "v1" || p[2] != "namespaces" || p[4] != "pods" {
			notFound(w, r.URL.Path)
			return
		}
		pod := p[5]
		if len(p) == 6 {
			if ok, why := c.authorize(r, p[3], "pods"); !ok {
				forbidden(w, pod, "pods", why)
				return
			}
			if r.Method != http.MethodGet {
				http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
				return
			}
			servePod(w, p[3], pod)
			return
		}
		if ok, why := c.authorize(r, p[3], "pods/"+p[6]); !ok {
			forbidden(w, pod, "pods", why)
			return
		}
		switch p[6] {
		case "exec", "attach":
			// The apiserver's query (stdin=true...) in the kubelet's terms.
			q := r.URL.Query()
			for api, kubelet := range map[string]string{"stdin": crrc.ExecStdinParam, "stdout": crrc.ExecStdoutParam, "stderr": crrc.ExecStderrParam, "tty": crrc.ExecTTYParam} {
				if q.Get(api) == "true" {
					q.Set(kubelet, "1")
				} else {
					q.Del(kubelet)
				}
			}
			r.URL.RawQuery = q.Encode()
			r.Form = nil
			opts, err := crrc.NewOptions(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if p[6] == "attach" {
				crrc.ServeAttach(w, r, runtime{c}, pod, "uid", r.URL.Query().Get("container"),
					opts, time.Minute, 30*time.Second, crrc.SupportedStreamingProtocols)
				return
			}
			crrc.ServeExec(w, r, runtime{c}, pod, "uid", r.URL.Query().Get("container"),
				r.URL.Query()["command"], opts, time.Minute, 30*time.Second, crrc.SupportedStreamingProtocols)
		case "portforward":
			opts, _ := crpf.BuildV4Options([]int32{8080})
			crpf.ServePortForward(w, r, runtime{c}, pod, "uid", opts, time.Minute, 30*time.Second, crpf.SupportedProtocols)
		default:
			http.Error(w, "unsupported", http.StatusNotFound)
		}
	}
	// TLS, as a real apiserver: clientcmd applies a kubeconfig's user
	// credentials only to https servers.
	c.Server = httptest.NewUnstartedServer(http.HandlerFunc(h))
	// wsmux demo serves this stand-in: no connection idles or dawdles for good.
	c.Server.Config.IdleTimeout, c.Server.Config.ReadHeaderTimeout = 2*time.Minute, 10*time.Second
	if o.Addr != "" {
		ln, err := net.Listen("tcp", o.Addr)
		if err != nil {
			echo.Close()
			c.wg.Wait()
			return nil, err
		}
		c.Server.Listener.Close()
		c.Server.Listener = ln
	}
	c.Server.StartTLS()
	return c, nil
}

// Close stops the cluster.
func (c *Cluster) Close() {
	c.Server.Close()
	c.echo.Close()
	c.wg.Wait()
}

func (c *Cluster) serveEcho() {
	defer c.wg.Done()
	for {
		conn, err := c.echo.Accept()
		if err != nil {
			return
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer conn.Close()
			_, _ = io.Copy(conn, conn)
			_ = conn.(*net.TCPConn).CloseWrite()
		}()
	}
}

// CAPEM is the PEM certificate the server's TLS certificate verifies with.
func (c *Cluster) CAPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Server.Certificate().Raw})
}

// RestConfig is the cluster's address and credentials.
func (c *Cluster) RestConfig() *rest.Config {
	return &rest.Config{Host: c.Server.URL, BearerToken: Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAPEM()}}
}

// Kubeconfig is a kubeconfig file's text for the cluster.
func (c *Cluster) Kubeconfig() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: standin
  cluster:
    server: %q
    certificate-authority-data: %s
users:
- name: gateway
  user: {token: %q}
contexts:
- name: gateway
  context: {cluster: standin, user: gateway}
current-context: gateway
`, c.Server.URL, base64.StdEncoding.EncodeToString(c.CAPEM()), Token)
}

// runtime runs Go "commands":
//
//	cat            stdin to stdout
//	err MSG        MSG to stderr
//	exit N         "bye" to stdout, then exit status N
//	tty [N]        print the first terminal size, then stdin to stdout
//	               (N bytes of it, then exit 0, when N is given: for
//	               protocols that cannot close stdin)
//
// Attach attaches to a container that runs cat.
type runtime struct{ c *Cluster }

func (rt runtime) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan crrc.TerminalSize, _ time.Duration) error {
	if len(cmd) == 0 {
		return errors.New("no command")
	}
	// Commands run at once: the kubelet then closes the connection
	// microseconds after accepting the last stream, the race that
	// adapters/bridge must survive (it once refused such a stream).
	switch cmd[0] {
	case "cat":
		if in == nil {
			return nil
		}
		_, err := io.Copy(out, in)
		return err
	case "err":
		_, err := fmt.Fprint(errw, strings.Join(cmd[1:], " "))
		return err
	case "exit":
		n, _ := strconv.Atoi(cmd[1])
		fmt.Fprint(out, "bye")
		return utilexec.CodeExitError{Err: fmt.Errorf("exit status %d", n), Code: n}
	case "tty":
		select {
		case sz := <-resize:
			rt.c.mu.Lock()
			rt.c.resizes = append(rt.c.resizes, sz)
			rt.c.mu.Unlock()
			fmt.Fprintf(out, "size %dx%d\n", sz.Width, sz.Height)
		case <-time.After(5 * time.Second):
			return errors.New("no terminal size")
		}
		if len(cmd) > 1 {
			n, _ := strconv.ParseInt(cmd[1], 10, 64)
			_, err := io.CopyN(out, in, n)
			return err
		}
		_, err := io.Copy(out, in)
		return err
	}
	if tty && rt.c.pty && out != nil {
		return runPTY(ctx, rt.c.Dir, cmd, in, out, resize)
	}
	var ew io.Writer
	if errw != nil {
		ew = errw
	} else if tty && out != nil {
		ew = out // a terminal has one output
	}
	return runLocal(ctx, rt.c.Dir, cmd, in, out, ew)
}

// runLocal runs cmd as a local process in dir (kubectl cp's tar, sh...).
func runLocal(ctx context.Context, dir string, cmd []string, in io.Reader, out io.WriteCloser, errw io.Writer) error {
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.Dir = dir
	if out != nil {
		c.Stdout = out
	}
	if errw != nil {
		c.Stderr = errw
	}
	if in != nil {
		// Copy stdin ourselves: exec.Cmd would wait for the copy to end,
		// but a process may exit without reading all of its stdin.
		w, err := c.StdinPipe()
		if err != nil {
			return err
		}
		go func() {
			_, _ = io.Copy(w, in)
			_ = w.Close()
		}()
	}
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return utilexec.CodeExitError{Err: err, Code: ee.ExitCode()}
	}
	return err
}

// AttachContainer attaches to a "container" that echoes its stdin.
func (rt runtime) AttachContainer(ctx context.Context, _, _, _ string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan crrc.TerminalSize) error {
	return rt.ExecInContainer(ctx, "", "", "", []string{"cat"}, in, out, errw, tty, resize, 0)
}

func (rt runtime) PortForward(ctx context.Context, pod, _ string, port int32, stream io.ReadWriteCloser) error {
	var d net.Dialer
	addr := rt.c.echoAddr
	if rt.c.forward != nil {
		if a := rt.c.forward(pod, port); a != "" {
			addr = a
		}
	}
	conn, err := d.DialContext(ctx, "tcp", addr)
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
