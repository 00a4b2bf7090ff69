package fuzz

import "github.com/wsmux/wsmux/mux"

// SessionPairEventLoop is SessionPairTCP with both sessions on
// mux.DriverEventLoop (on systems without it they fall back to
// mux.DriverFastPaths): the same program and checks, with every session's
// reads, writes and timers run by the event loop's workers.
func SessionPairEventLoop(data []byte) error {
	data = data[:len(data):len(data)]
	if len(data) > maxSessionInput {
		return nil
	}
	p := newPair(data, Clock{RealTime: true})
	p.tcp = true
	for _, c := range p.cfg {
		c.Driver = mux.DriverEventLoop
	}
	return p.run()
}
