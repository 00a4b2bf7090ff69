package fuzz

import "github.com/wsmux/wsmux/fuzz/flowfuzz"

// The flow-control harness lives in package flowfuzz, which imports only
// flow, so that flow's tests need not build mux; it is re-exported here
// beside the session harnesses.

// FlowProgram: see flowfuzz.FlowProgram.
func FlowProgram(data []byte) error { return flowfuzz.FlowProgram(data) }
