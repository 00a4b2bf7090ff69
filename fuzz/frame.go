package fuzz

import (
	"net/http"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/fuzz/framefuzz"
)

// The frame codec's harnesses live in package framefuzz, which imports
// only frame, so that frame's tests need not build mux; they are
// re-exported here beside the session harnesses.

// DecodeFrame: see framefuzz.DecodeFrame.
func DecodeFrame(data []byte) error { return framefuzz.DecodeFrame(data) }

// DecodeMessage: see framefuzz.DecodeMessage.
func DecodeMessage(data []byte) error { return framefuzz.DecodeMessage(data) }

// HeaderBlock: see framefuzz.HeaderBlock.
func HeaderBlock(data []byte) error { return framefuzz.HeaderBlock(data) }

// looseLimits are the widest limits a decoder can be given.
func looseLimits() frame.Limits { return framefuzz.LooseLimits() }

// headerDiff describes how got differs from want, or returns nil.
func headerDiff(got, want http.Header) error { return framefuzz.HeaderDiff(got, want) }
