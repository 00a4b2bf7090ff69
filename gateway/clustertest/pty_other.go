//go:build !linux

package clustertest

import (
	"context"
	"errors"
	"io"

	crrc "k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

func runPTY(context.Context, string, []string, io.Reader, io.Writer, <-chan crrc.TerminalSize) error {
	return errors.New("pseudo-terminals are implemented for Linux only")
}
