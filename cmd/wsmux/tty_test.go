//go:build linux

package main

import (
	"io"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
	"k8s.io/client-go/tools/remotecommand"
)

// openPTY opens a pseudo-terminal pair (master, slave).
func openPTY(t *testing.T) (*os.File, *os.File) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("ptsname: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open slave: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// TestTTYRawModeAndResize: -t on a real terminal puts it in raw mode,
// reports its size, reports a new size after SIGWINCH, and restores the
// terminal on exit.
func TestTTYRawModeAndResize(t *testing.T) {
	m, s := openPTY(t)
	setSize := func(w, h uint16) {
		if err := unix.IoctlSetWinsize(int(m.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: w, Row: h}); err != nil {
			t.Fatal(err)
		}
	}
	setSize(100, 30)
	if !term.IsTerminal(int(s.Fd())) {
		t.Skip("pty slave is not a terminal")
	}
	a := &app{stdin: s, stdout: s, stderr: io.Discard}
	restore, sizes, ok := a.setupTTY(true)
	if !ok {
		t.Fatal("setupTTY refused a terminal")
	}
	tios, _ := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
	if tios.Lflag&(unix.ICANON|unix.ECHO) != 0 {
		t.Error("terminal not in raw mode")
	}
	if sz := sizes.Next(); sz == nil || sz.Width != 100 || sz.Height != 30 {
		t.Fatalf("first size %+v, want 100x30", sz)
	}
	setSize(120, 40)
	syscall.Kill(os.Getpid(), syscall.SIGWINCH)
	got := make(chan *remotecommand.TerminalSize, 1)
	go func() { got <- sizes.Next() }()
	select {
	case sz := <-got:
		if sz == nil || sz.Width != 120 || sz.Height != 40 {
			t.Fatalf("size after SIGWINCH %+v, want 120x40", sz)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no size after SIGWINCH")
	}
	restore()
	after, _ := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
	if after.Lflag&unix.ICANON == 0 {
		t.Error("terminal not restored")
	}
	if sizes.Next() != nil {
		t.Error("queue still open after restore")
	}
}
