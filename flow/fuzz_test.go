package flow_test

import (
	"testing"

	"github.com/wsmux/wsmux/fuzz/flowfuzz"
)

// Seed programs for FuzzFlow; see flowfuzz.FlowProgram for the encoding. The
// header is: budget selector, raw sender window, receiver initial window,
// maximum selector; then one opcode and its operands per operation.
var flowSeeds = [][]byte{
	{},
	// Unlimited budget, windows 1000/4000, RTT ~10 ms; send, read (fast:
	// doubles), deliver, send, wait, read, deliver, EnsureWindow(2×),
	// discard, cheat by one byte, cheat by -1, raw grant of 2^31-1,
	// release, reinit with 16 MiB.
	{1, 3, 3, 0x82,
		7, 0xA2, 0x00, 0x0A,
		0, 0x03, 0xE8, 0,
		2, 0x03, 0xE8, 0,
		3,
		0, 0x07, 0xD0, 0,
		6, 0, 0x01, 0x00,
		2, 0x07, 0xD0, 0,
		3,
		5, 5,
		9, 0, 0x00, 0x64, 0,
		1, 1,
		1, 0xFF,
		4, 1, 0x7F, 0xFF, 0xFF, 0xFF,
		10,
		11, 5, 0x83,
		0, 0xFF, 0xFF, 8,
		2, 0xFF, 0xFF, 8,
		3},
	// Budget limited to 2048 bytes that later refuses; window 1000 with
	// max 8000: growth stops at the budget.
	{2, 0x00, 0x00, 0x08, 0x00, 3, 3, 0x83,
		7, 0xA2, 0x00, 0x0A,
		0, 0x03, 0xE8, 0, 2, 0x03, 0xE8, 0, 3,
		0, 0x07, 0xD0, 0, 2, 0x07, 0xD0, 0, 3,
		8, 0,
		5, 9,
		8, 0,
		5, 9,
		0, 0x0F, 0xA0, 0, 2, 0x0F, 0xA0, 0, 3},
	// Tiny windows: initial 1, max 4, every byte an update.
	{0, 1, 1, 0x82,
		7, 0x0A, 0x00, 0x01,
		0, 0, 1, 0, 2, 0, 1, 0, 3,
		0, 0, 1, 0, 2, 0, 1, 0, 3,
		0, 0, 4, 0, 2, 0, 4, 0, 3,
		1, 0x80, 0xFF, 0xFF, 0xFF, 0xFF},
	// Maximum windows: raw sender at 2^31-1, receiver at 2^31-1.
	{3, 6, 6, 6,
		4, 1, 0, 0, 0, 1,
		4, 1, 0, 0, 0, 0,
		4, 0, 0xFF, 0xFF, 15,
		0, 0xFF, 0xFF, 15,
		2, 0xFF, 0xFF, 15,
		3,
		1, 0x00},
}

// FuzzFlow runs random programs of flow-control operations through
// flowfuzz.FlowProgram, which checks the credit invariants after every step.
func FuzzFlow(f *testing.F) {
	for _, s := range flowSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := flowfuzz.FlowProgram(data); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFlowSeeds makes sure the seeds run cleanly and exercise growth.
func TestFlowSeeds(t *testing.T) {
	for i, s := range flowSeeds {
		if err := flowfuzz.FlowProgram(s); err != nil {
			t.Errorf("seed %d: %v", i, err)
		}
	}
}
