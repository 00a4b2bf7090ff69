//go:build !linux

package testnet

import (
	"context"
	"errors"
	"os/exec"
)

// PTY is a pseudo-terminal (Linux only).
type PTY struct{}

// StartOnPTY is not available here.
func StartOnPTY(*exec.Cmd, int, int) (*PTY, error) {
	return nil, errors.New("testnet: no pseudo-terminals here")
}

func (*PTY) Resize(int, int) error { return errors.ErrUnsupported }
func (*PTY) Type(string) error     { return errors.ErrUnsupported }
func (*PTY) Output() []byte        { return nil }
func (*PTY) WaitFor(context.Context, int, string) (int, error) {
	return 0, errors.ErrUnsupported
}
func (*PTY) Close() error { return nil }
