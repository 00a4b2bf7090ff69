package clustertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
	crrc "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// openPTY returns a new pseudo-terminal's controlling side and the path
// of its terminal side.
func openPTY() (*os.File, string, error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", err
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, "", err
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, "", err
	}
	return m, fmt.Sprintf("/dev/pts/%d", n), nil
}

// runPTY runs cmd on a new pseudo-terminal: stdin to it, its output to
// out, each terminal size from resize applied to it.
func runPTY(ctx context.Context, dir string, cmd []string, in io.Reader, out io.Writer, resize <-chan crrc.TerminalSize) error {
	m, name, err := openPTY()
	if err != nil {
		return err
	}
	defer m.Close()
	s, err := os.OpenFile(name, os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	// Through SyscallConn: a size that arrives as the session ends must not
	// race the deferred Close (m.Fd() would).
	rc, err := m.SyscallConn()
	if err != nil {
		return err
	}
	setSize := func(sz crrc.TerminalSize) {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: sz.Width, Row: sz.Height})
		})
	}
	// The first size before the command starts, so it sees it.
	select {
	case sz, ok := <-resize:
		if ok {
			setSize(sz)
		}
	case <-ctx.Done():
		s.Close()
		return ctx.Err()
	}
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.Dir = dir
	c.Env = append(os.Environ(), "TERM=xterm")
	c.Stdin, c.Stdout, c.Stderr = s, s, s
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := c.Start(); err != nil {
		s.Close()
		return err
	}
	s.Close()
	go func() {
		for sz := range resize {
			setSize(sz)
		}
	}()
	if in != nil {
		go func() { _, _ = io.Copy(m, in) }()
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, m) // ends with EIO once the terminal side is closed
	}()
	err = c.Wait()
	<-copied
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return utilexec.CodeExitError{Err: err, Code: ee.ExitCode()}
	}
	return err
}
