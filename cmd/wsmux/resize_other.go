//go:build !unix

package main

import (
	"os"
	"time"
)

// resizePoll is how often the terminal's size is looked at where no signal
// says it changed (Windows consoles; kubectl polls them as often).
const resizePoll = 250 * time.Millisecond

// pollTick is the "signal" of a poll: the size may have changed.
type pollTick struct{}

func (pollTick) String() string { return "terminal size poll" }
func (pollTick) Signal()        {}

// watchResize delivers a tick every resizePoll until its stop function is
// called; the caller compares sizes.
func watchResize() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	t := time.NewTicker(resizePoll)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-t.C:
				select {
				case ch <- pollTick{}:
				default:
				}
			}
		}
	}()
	return ch, func() { t.Stop(); close(done) }
}
