// Package kubelettest runs the real kubelet/CRI streaming handlers of
// k8s.io/cri-streaming (remotecommand.ServeExec and
// portforward.ServePortForward, which speak SPDY only) behind an
// httptest.Server, with a fake runtime that runs real local processes and
// forwards ports to a local TCP echo server. It is test scaffolding for the
// adapters' end-to-end tests.
//
// It imports the kubelet's streaming handlers and testing, and must not import
// mux or the adapters: it is the real kubelet's code the adapters are
// tested against. Tests only.
package kubelettest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	crpf "k8s.io/cri-streaming/pkg/streaming/portforward"
	crrc "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// Kubelet is a running fake kubelet streaming server.
type Kubelet struct {
	Server *httptest.Server
	// EchoAddr is the TCP echo server port-forward streams are sent to.
	EchoAddr string
	// Resizes receives every terminal size the executor saw.
	Resizes chan crrc.TerminalSize

	mu        sync.Mutex
	forwarded int
	pfErr     error
}

// Forwarded is how many port-forward streams were served.
func (k *Kubelet) Forwarded() int { k.mu.Lock(); defer k.mu.Unlock(); return k.forwarded }

// FailPortForward makes every later PortForward return err.
func (k *Kubelet) FailPortForward(err error) { k.mu.Lock(); k.pfErr = err; k.mu.Unlock() }

// ExecURL is the URL of an exec of cmd (run by /bin/sh -c) with the given
// streams.
func (k *Kubelet) ExecURL(cmd string, stdin, stdout, stderr, tty bool) *url.URL {
	u, _ := url.Parse(k.Server.URL + "/exec")
	q := url.Values{}
	q.Set("command", cmd)
	b := func(name string, v bool) {
		if v {
			q.Set(name, "1")
		}
	}
	b(crrc.ExecStdinParam, stdin)
	b(crrc.ExecStdoutParam, stdout)
	b(crrc.ExecStderrParam, stderr)
	b(crrc.ExecTTYParam, tty)
	u.RawQuery = q.Encode()
	return u
}

// PortForwardURL is the URL of a port-forward session.
func (k *Kubelet) PortForwardURL() *url.URL {
	u, _ := url.Parse(k.Server.URL + "/portforward")
	return u
}

// Start starts the server and the echo server; both stop at t's cleanup.
func Start(t testing.TB) *Kubelet {
	t.Helper()
	k := &Kubelet{Resizes: make(chan crrc.TerminalSize, 64)}
	k.EchoAddr = startEcho(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/exec", func(w http.ResponseWriter, r *http.Request) {
		opts, err := crrc.NewOptions(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		crrc.ServeExec(w, r, executor{k}, "pod", "uid", "container",
			[]string{r.URL.Query().Get("command")}, opts,
			time.Minute, 30*time.Second, crrc.SupportedStreamingProtocols)
	})
	mux.HandleFunc("/portforward", func(w http.ResponseWriter, r *http.Request) {
		// As the CRI streaming server does: options from the request's ports
		// (used by the legacy WebSocket path).
		opts, err := crpf.BuildV4Options([]int32{8080})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		crpf.ServePortForward(w, r, forwarder{k}, "pod", "uid", opts,
			time.Minute, 30*time.Second, crpf.SupportedProtocols)
	})
	k.Server = httptest.NewServer(mux)
	t.Cleanup(k.Server.Close)
	return k
}

func startEcho(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}()
		}
	}()
	return ln.Addr().String()
}

type executor struct{ k *Kubelet }

// ExecInContainer runs cmd[0] with /bin/sh -c. With a TTY it first waits
// (up to 5 s) for a terminal size and prints "size WxH" to stdout.
func (e executor) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan crrc.TerminalSize, _ time.Duration) error {
	if tty && resize != nil {
		select {
		case sz, ok := <-resize:
			if ok {
				e.k.Resizes <- sz
				fmt.Fprintf(out, "size %dx%d\n", sz.Width, sz.Height)
			}
		case <-time.After(5 * time.Second):
			return errors.New("no terminal size within 5 s")
		}
		go func() {
			for sz := range resize {
				select {
				case e.k.Resizes <- sz:
				default:
				}
			}
		}()
	}
	c := exec.CommandContext(ctx, "/bin/sh", "-c", cmd[0])
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

type forwarder struct{ k *Kubelet }

// PortForward connects the stream to the echo server whatever the port.
func (f forwarder) PortForward(ctx context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	f.k.mu.Lock()
	f.k.forwarded++
	pfErr := f.k.pfErr
	f.k.mu.Unlock()
	if pfErr != nil {
		// Fail like a refused dial does, a moment later: failing at once
		// races the kubelet's stream reset with the client's pending
		// SPDY CreateStream of the data stream (spdystream then fails it
		// with "Stream reset" and client-go never reads the error).
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
		return pfErr
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", f.k.EchoAddr)
	if err != nil {
		return fmt.Errorf("dial port %s: %w", strconv.Itoa(int(port)), err)
	}
	defer c.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(c, stream)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	_, err = io.Copy(stream, c)
	<-done
	return err
}
