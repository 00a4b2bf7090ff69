package flow_test

import (
	"fmt"
	"time"

	"github.com/wsmux/wsmux/flow"
)

// A receiver grants the peer a 1000-byte window; the peer's sender spends
// it; the application reads, and once a quarter of the window has been read
// the receiver returns that credit in a WINDOW_UPDATE.
func Example() {
	var recv flow.Receiver
	recv.Init(flow.ReceiverConfig{Initial: 1000, Max: 4000})

	var send flow.Sender // the peer's side, after reading our SETTINGS
	send.Init(1000)

	// The peer sends 600 bytes.
	if send.Consume(600) {
		if err := recv.Receive(600); err != nil {
			fmt.Println("flow-control error:", err)
		}
	}
	fmt.Println("sender credit:", send.Available())

	var now time.Duration   // the caller's monotonic clock
	rtt := time.Duration(0) // no RTT estimate yet: no auto-tuning

	// The application reads 200 bytes: below a quarter, nothing to send.
	fmt.Println("update after 200:", recv.Consume(200, now, rtt))
	// 100 more: 300 >= 250, a WINDOW_UPDATE of 300 is due.
	delta := recv.Consume(100, now, rtt)
	fmt.Println("update after 300:", delta)

	// The peer applies it.
	if err := send.Grant(delta); err != nil {
		fmt.Println("window update error:", err)
	}
	fmt.Println("sender credit:", send.Available(), "receiver outstanding:", recv.Outstanding(), "buffered:", recv.Buffered())

	// Sending more than granted is caught.
	fmt.Println(recv.Receive(701))
	// Output:
	// sender credit: 400
	// update after 200: 0
	// update after 300: 300
	// sender credit: 700 receiver outstanding: 700 buffered: 300
	// flow: peer exceeded its flow-control window
}
