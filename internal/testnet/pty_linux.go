package testnet

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// PTY is a pseudo-terminal a command runs on, as on a person's terminal:
// what it writes is kept (Output), what is written to the PTY is typed.
type PTY struct {
	m *os.File

	mu      sync.Mutex
	out     bytes.Buffer
	changed chan struct{} // closed and replaced at each read
	done    chan struct{} // closed once the terminal side is gone
}

// StartOnPTY starts c on a new pseudo-terminal of cols x rows, as its
// controlling terminal (a session of its own), and reads its output until
// the command and its children are gone. The command's own Stdin, Stdout
// and Stderr are replaced.
func StartOnPTY(c *exec.Cmd, cols, rows int) (*PTY, error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, err
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, err
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, err
	}
	defer s.Close()
	p := &PTY{m: m, changed: make(chan struct{}), done: make(chan struct{})}
	if err := p.Resize(cols, rows); err != nil {
		m.Close()
		return nil, err
	}
	c.Stdin, c.Stdout, c.Stderr = s, s, s
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := c.Start(); err != nil {
		m.Close()
		return nil, err
	}
	go p.read()
	return p, nil
}

func (p *PTY) read() {
	defer close(p.done)
	buf := make([]byte, 32<<10)
	for {
		n, err := p.m.Read(buf)
		p.mu.Lock()
		p.out.Write(buf[:n])
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
		if err != nil { // EIO once no process holds the terminal side
			return
		}
	}
}

// Resize sets the terminal's size; the kernel signals SIGWINCH to the
// command.
func (p *PTY) Resize(cols, rows int) error {
	return unix.IoctlSetWinsize(int(p.m.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
}

// Type writes s to the terminal, as typed.
func (p *PTY) Type(s string) error {
	_, err := p.m.Write([]byte(s))
	return err
}

// Output returns what the command wrote so far.
func (p *PTY) Output() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.out.Bytes())
}

// WaitFor waits until the output after offset from contains want, and
// returns the offset just past it.
func (p *PTY) WaitFor(ctx context.Context, from int, want string) (int, error) {
	for {
		p.mu.Lock()
		b, ch := p.out.Bytes(), p.changed
		if i := bytes.Index(b[min(from, len(b)):], []byte(want)); i >= 0 {
			p.mu.Unlock()
			return min(from, len(b)) + i + len(want), nil
		}
		p.mu.Unlock()
		select {
		case <-ch:
		case <-p.done:
			p.mu.Lock()
			found := bytes.Contains(p.out.Bytes()[min(from, p.out.Len()):], []byte(want))
			p.mu.Unlock()
			if found {
				continue
			}
			return 0, fmt.Errorf("the terminal closed before %q came", want)
		case <-ctx.Done():
			return 0, fmt.Errorf("%q did not come: %w", want, ctx.Err())
		}
	}
}

// Close waits for the output to end (the command must have exited) and
// closes the terminal.
func (p *PTY) Close() error {
	<-p.done
	return p.m.Close()
}
