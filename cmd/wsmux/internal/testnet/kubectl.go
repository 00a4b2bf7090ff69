package testnet

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

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
