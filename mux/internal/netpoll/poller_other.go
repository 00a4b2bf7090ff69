//go:build !linux

package netpoll

import "net"

// Supported reports whether conn can be registered with a Poller: never on
// this system (the Poller uses Linux's epoll).
func Supported(conn net.Conn) bool { return false }

// Poller is unavailable on this system: New fails with ErrUnsupported.
type Poller struct{}

// New fails with ErrUnsupported on this system.
func New(*Pool) (*Poller, error) { return nil, ErrUnsupported }

// Registration is one socket registered with a Poller.
type Registration struct{}

// Add fails with ErrUnsupported on this system.
func (p *Poller) Add(r *Registration, conn net.Conn, h Handler) error { return ErrUnsupported }

// Remove does nothing on this system.
func (r *Registration) Remove() {}

// Read fails with ErrUnsupported on this system.
func (r *Registration) Read(b []byte) (int, error) { return 0, ErrUnsupported }

// Write fails with ErrUnsupported on this system.
func (r *Registration) Write(b []byte) (int, error) { return 0, ErrUnsupported }

// Writev fails with ErrUnsupported on this system.
func (r *Registration) Writev(v [][]byte) (int, error) { return 0, ErrUnsupported }

// MaxVec is the most buffers one Writev writes.
const MaxVec = 1024

// Close does nothing on this system.
func (p *Poller) Close() error { return nil }
