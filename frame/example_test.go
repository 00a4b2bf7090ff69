package frame_test

import (
	"fmt"
	"net/http"

	"github.com/wsmux/wsmux/frame"
)

// Encode a few frames into one message buffer and walk them back.
func Example() {
	lim := frame.DefaultLimits()
	h := http.Header{}
	h.Set("streamType", "stdout")

	msg, _ := frame.AppendHeaders(nil, 1, frame.FlagSYN, h, &lim.Block)
	msg, _ = frame.AppendData(msg, 1, false, []byte("hello"))
	msg, _ = frame.AppendWindowUpdate(msg, 0, 1<<16)

	var it frame.Iterator
	it.Reset(msg, lim)
	for it.Next() {
		f := it.Frame()
		fmt.Println(f.Type, f.StreamID, f.Length)
	}
	fmt.Println("err:", it.Err())
	// Output:
	// HEADERS 1 19
	// DATA 1 5
	// WINDOW_UPDATE 0 0
	// err: <nil>
}

// A malformed frame is an *Error whose Code is what the session must send.
func ExampleError() {
	bad := []byte{0x2, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0} // WINDOW_UPDATE with delta 0
	_, _, err := frame.Parse(bad, &frame.Limits{})
	if fe, ok := err.(*frame.Error); ok {
		fmt.Println(fe.Code, "-", fe.Reason)
	}
	// Output:
	// PROTOCOL_ERROR - WINDOW_UPDATE with a zero delta
}
