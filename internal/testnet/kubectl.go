package testnet

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// Kubectl is the kubectl on this machine pointed at one server, with no
// kubeconfig of its own and HOME in a temporary folder.
type Kubectl struct {
	Path   string // the binary
	Server string // its --server
	CA     string // the file of its --certificate-authority
	Home   string // HOME and the working directory
}

// NewKubectl points the kubectl on this machine at server, trusting the
// PEM certificate ca; without kubectl in PATH it skips t.
func NewKubectl(t testing.TB, server string, ca []byte) *Kubectl {
	t.Helper()
	path, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not found in PATH: install kubectl (1.31 or later) to run the tests of unmodified kubectl")
	}
	k := &Kubectl{Path: path, Server: server, Home: t.TempDir()}
	k.CA = filepath.Join(k.Home, "ca.pem")
	if err := os.WriteFile(k.CA, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k.kubeconfig(), []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

// kubeconfig is an empty kubeconfig, so that no file of the machine's
// counts.
func (k *Kubectl) kubeconfig() string { return filepath.Join(k.Home, "no-kubeconfig") }

// Cmd is kubectl args with token as its credentials; env adds variables
// (KUBECTL_..._WEBSOCKETS=false).
func (k *Kubectl) Cmd(ctx context.Context, token string, env []string, args ...string) *exec.Cmd {
	full := append([]string{"--server", k.Server, "--token", token, "--certificate-authority", k.CA, "--kubeconfig", k.kubeconfig()}, args...)
	c := exec.CommandContext(ctx, k.Path, full...)
	c.Env = append([]string{"HOME=" + k.Home, "PATH=" + os.Getenv("PATH")}, env...)
	c.Dir = k.Home
	return c
}

// Run runs kubectl args (for a minute at most) and returns its stdout, its
// stderr and its exit code.
func (k *Kubectl) Run(t testing.TB, token string, env []string, stdin io.Reader, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return RunCmd(t, k.Cmd(ctx, token, env, args...), stdin)
}

// RunCmd runs c (its Stdin set to stdin) and returns its stdout, its
// stderr and its exit code; a command that could not run at all fails t.
func RunCmd(t testing.TB, c *exec.Cmd, stdin io.Reader) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	c.Stdin, c.Stdout, c.Stderr = stdin, &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", c.Args, err)
	}
	return out.String(), errb.String(), code
}

// forwarding is the line kubectl port-forward prints for each port.
var forwarding = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)`)

// PortForward starts c, a kubectl port-forward forwarding want ports,
// and returns the local addresses it printed ("127.0.0.1:PORT", in its
// order) and a func that stops it (cancel must end c: its context's).
func PortForward(t testing.TB, c *exec.Cmd, cancel context.CancelFunc, want int) ([]string, func()) {
	t.Helper()
	var errb Buffer
	c.Stderr = &errb
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() { cancel(); _ = c.Wait() }
	var addrs []string
	buf := make([]byte, 4096)
	var seen []byte
	for len(addrs) < want {
		n, err := stdout.Read(buf)
		seen = append(seen, buf[:n]...)
		addrs = addrs[:0]
		for _, m := range forwarding.FindAllSubmatch(seen, -1) {
			addrs = append(addrs, "127.0.0.1:"+string(m[1]))
		}
		if err != nil && len(addrs) < want {
			stop()
			t.Fatalf("kubectl port-forward: %v; stdout %q, stderr %q", err, seen, errb.String())
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }() // "Handling connection for ..."
	return addrs, stop
}

// EchoThrough sends size random bytes through addr (to an echo server),
// half-closes, and checks that exactly those bytes come back.
func EchoThrough(addr string, size int) error {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second)) // a hang guard
	data := make([]byte, size)
	rand.Read(data)
	go func() {
		_, _ = c.Write(data)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		return fmt.Errorf("%s: %v after %d bytes", addr, err, len(got))
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("%s: %d bytes back of %d, not the bytes sent", addr, len(got), size)
	}
	return nil
}
