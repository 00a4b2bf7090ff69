//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// watchResize delivers SIGWINCH, the terminal's "size changed", until its
// stop function is called.
func watchResize() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	return ch, func() { signal.Stop(ch) }
}
