package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/adapters/e2e/internal/kubelettest"
	apispdy "k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	clientspdy "k8s.io/client-go/transport/spdy"
	clientexec "k8s.io/client-go/util/exec"
)

// client is how a test reaches a streaming server: client-go's round tripper
// and upgrader, and the HTTP method.
type client struct {
	name   string
	new    func(t testing.TB) (http.RoundTripper, clientspdy.Upgrader)
	method string
}

var spdyClient = client{
	name: "spdy",
	new: func(t testing.TB) (http.RoundTripper, clientspdy.Upgrader) {
		rt, err := apispdy.NewRoundTripper(nil)
		if err != nil {
			t.Fatal(err)
		}
		return rt, rt
	},
	method: http.MethodPost,
}

// target rewrites a kubelet URL to the URL the client must use (e.g. a
// bridge in front of the kubelet).
type target func(t testing.TB, k *kubelettest.Kubelet, u *url.URL) *url.URL

func direct(_ testing.TB, _ *kubelettest.Kubelet, u *url.URL) *url.URL { return u }

func execStream(t *testing.T, c client, u *url.URL, opts remotecommand.StreamOptions) error {
	t.Helper()
	rt, up := c.new(t)
	ex, err := remotecommand.NewSPDYExecutorForTransports(rt, up, c.method, u)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return ex.StreamWithContext(ctx, opts)
}

type sizeQueue struct {
	ch chan *remotecommand.TerminalSize
}

func (q sizeQueue) Next() *remotecommand.TerminalSize { return <-q.ch }

func runExecTests(t *testing.T, c client, tgt target) {
	k := kubelettest.Start(t)
	t.Run("StdinStdoutStderr", func(t *testing.T) {
		var out, errb bytes.Buffer
		err := execStream(t, c, tgt(t, k, k.ExecURL("cat; echo oops >&2", true, true, true, false)), remotecommand.StreamOptions{
			Stdin: strings.NewReader("hello from stdin\n"), Stdout: &out, Stderr: &errb,
		})
		if err != nil {
			t.Fatalf("exec: %v", err)
		}
		// cat only ends when stdin's EOF (a half-close) reached the process.
		if out.String() != "hello from stdin\n" || errb.String() != "oops\n" {
			t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
		}
	})
	t.Run("ExitCodeAndStdoutTail", func(t *testing.T) {
		var out bytes.Buffer
		err := execStream(t, c, tgt(t, k, k.ExecURL("head -c 200000 /dev/zero; echo; echo last line; exit 42", false, true, false, false)), remotecommand.StreamOptions{Stdout: &out})
		var ee clientexec.ExitError
		if !errors.As(err, &ee) || ee.ExitStatus() != 42 {
			t.Fatalf("err = %v (%T), want exit code 42", err, err)
		}
		if out.Len() != 200000+1+10 || !strings.HasSuffix(out.String(), "last line\n") {
			t.Fatalf("stdout: %d bytes, tail %q", out.Len(), out.String()[max(0, out.Len()-20):])
		}
	})
	t.Run("TTYResize", func(t *testing.T) {
		q := sizeQueue{make(chan *remotecommand.TerminalSize, 4)}
		q.ch <- &remotecommand.TerminalSize{Width: 120, Height: 40}
		q.ch <- &remotecommand.TerminalSize{Width: 80, Height: 24}
		var out bytes.Buffer
		done := make(chan error, 1)
		pr, pw := io.Pipe()
		go func() {
			done <- execStream(t, c, tgt(t, k, k.ExecURL("cat", true, true, false, true)), remotecommand.StreamOptions{
				Stdin: pr, Stdout: &out, Tty: true, TerminalSizeQueue: q,
			})
		}()
		for _, want := range []kubeletSize{{120, 40}, {80, 24}} {
			select {
			case sz := <-k.Resizes:
				if sz.Width != want.w || sz.Height != want.h {
					t.Errorf("resize %dx%d, want %dx%d", sz.Width, sz.Height, want.w, want.h)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("resize event did not reach the runtime")
			}
		}
		pw.Close()
		close(q.ch)
		if err := <-done; err != nil {
			t.Fatalf("exec: %v", err)
		}
		if !strings.HasPrefix(out.String(), "size 120x40\n") {
			t.Fatalf("stdout %q", out.String())
		}
	})
	t.Run("Echo8MiB", func(t *testing.T) {
		in := make([]byte, 8<<20)
		_, _ = rand.Read(in)
		h := sha256.New()
		err := execStream(t, c, tgt(t, k, k.ExecURL("cat", true, true, false, false)), remotecommand.StreamOptions{
			Stdin: bytes.NewReader(in), Stdout: h,
		})
		if err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256(in)
		if !bytes.Equal(h.Sum(nil), want[:]) {
			t.Fatal("sha256 mismatch")
		}
	})
}

type kubeletSize struct{ w, h uint16 }

func startPortForward(t *testing.T, c client, u *url.URL) (addr string, stop func() error, exited func(time.Duration) (error, bool)) {
	t.Helper()
	rt, up := c.new(t)
	dialer := clientspdy.NewDialer(up, &http.Client{Transport: rt}, c.method, u)
	stopCh, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stopCh, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("ForwardPorts: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("port-forward not ready")
	}
	ports, err := pf.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() error {
		once.Do(func() { close(stopCh) })
		select {
		case err := <-errc:
			return err
		case <-time.After(10 * time.Second):
			return errors.New("ForwardPorts did not return within 10 s of stop")
		}
	}
	// exited waits for ForwardPorts to return on its own (stop and a lost
	// connection both ready make its select pick at random).
	exited = func(d time.Duration) (error, bool) {
		select {
		case err := <-errc:
			errc <- err
			return err, true
		case <-time.After(d):
			return nil, false
		}
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0].Local), stop, exited
}

func echoThrough(addr string, n int) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	in := make([]byte, n)
	_, _ = rand.Read(in)
	want := sha256.Sum256(in)
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(in)
		_ = c.(*net.TCPConn).CloseWrite()
		werr <- err
	}()
	h := sha256.New()
	got, err := io.Copy(h, c)
	if err := <-werr; err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err != nil || got != int64(n) || !bytes.Equal(h.Sum(nil), want[:]) {
		return fmt.Errorf("echoed %d of %d bytes (%v), sha256 match %v", got, n, err, bytes.Equal(h.Sum(nil), want[:]))
	}
	return nil
}

// runPortForwardTests moves 4 x size through concurrent forwarded
// connections (4 x 16 MiB = 64 MiB for the main configurations).
func runPortForwardTests(t *testing.T, c client, tgt target, size int) {
	k := kubelettest.Start(t)
	t.Run(fmt.Sprintf("Concurrent4x%dMiB", size>>20), func(t *testing.T) {
		addr, stop, _ := startPortForward(t, c, tgt(t, k, k.PortForwardURL()))
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); errs <- echoThrough(addr, size) }()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		if err := stop(); err != nil {
			t.Fatalf("ForwardPorts: %v", err)
		}
	})
	t.Run("RemoteErrorLosesConnection", func(t *testing.T) {
		k := kubelettest.Start(t)
		k.FailPortForward(errors.New("connection refused by pod"))
		addr, stop, exited := startPortForward(t, c, tgt(t, k, k.PortForwardURL()))
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, nc)
		nc.Close()
		err, ok := exited(5 * time.Second)
		if !ok {
			err = stop()
		}
		if err == nil && c.name == "spdy" {
			// SPDY race: the kubelet resets the data stream at once and
			// spdystream may fail the client's pending CreateStream with
			// "Stream reset", so client-go never reads the error stream.
			t.Skip("SPDY lost the remote error (CreateStream raced with the server's reset)")
		}
		if !errors.Is(err, portforward.ErrLostConnectionToPod) {
			t.Fatalf("ForwardPorts = %v, want ErrLostConnectionToPod", err)
		}
	})
}

func TestExecSPDY(t *testing.T)        { runExecTests(t, spdyClient, direct) }
func TestPortForwardSPDY(t *testing.T) { runPortForwardTests(t, spdyClient, direct, 16<<20) }
