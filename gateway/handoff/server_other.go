//go:build !linux

package handoff

import (
	"context"
	"errors"
)

// Listen fails: the handoff needs Linux (SOCK_SEQPACKET, SO_PEERCRED).
func Listen(Config) (*Server, error) {
	return nil, errors.New("--handoff-socket needs Linux (SOCK_SEQPACKET and SO_PEERCRED); use tickets (--ticket-key) here")
}

// Serve returns at once.
func (s *Server) Serve() error { return nil }

// Close does nothing.
func (s *Server) Close() error { return nil }

// WaitIdle returns at once.
func (s *Server) WaitIdle(context.Context) error { return nil }
