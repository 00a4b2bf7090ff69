//go:build gofuzz

package fuzz

import "github.com/wsmux/wsmux/fuzz/flowfuzz"

// FuzzFlow is the go-fuzz entry point for FlowProgram. It panics on an
// invariant violation, returns 1 for inputs that ran at least one operation
// (worth keeping in the corpus) and 0 otherwise.
func FuzzFlow(data []byte) int {
	ops, err := flowfuzz.RunFlowProgram(data)
	if err != nil {
		panic(err)
	}
	if ops == 0 {
		return 0
	}
	return 1
}
