//go:build gofuzz

package fuzz

import "github.com/wsmux/wsmux/fuzz/framefuzz"

// FuzzDecodeFrame is the go-fuzz entry point for DecodeFrame. It panics on an
// invariant violation, returns 1 when data held a valid frame (worth keeping
// in the corpus) and 0 otherwise.
func FuzzDecodeFrame(data []byte) int { return goFuzzResult(framefuzz.DecodeFrameResult(data)) }

// FuzzDecodeMessage is the go-fuzz entry point for DecodeMessage: 1 when data
// decoded as a whole message, 0 otherwise, a panic on a violation.
func FuzzDecodeMessage(data []byte) int { return goFuzzResult(framefuzz.DecodeMessageResult(data)) }

// FuzzHeaderBlock is the go-fuzz entry point for HeaderBlock: 1 when data
// decoded as a valid header block, 0 otherwise, a panic on a violation.
func FuzzHeaderBlock(data []byte) int { return goFuzzResult(framefuzz.HeaderBlockResult(data)) }

func goFuzzResult(decoded bool, err error) int {
	if err != nil {
		panic(err)
	}
	if decoded {
		return 1
	}
	return 0
}
