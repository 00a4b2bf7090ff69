package bench

import (
	"testing"

	"github.com/wsmux/wsmux/mux"
)

// wsmux-eventloop: the wsmux transport with both sessions on
// mux.DriverEventLoop (one epoll instance, a bounded worker pool and one
// timer wheel for every session; no goroutine per session). Same setup and
// Config as "wsmux" otherwise.

func init() {
	Register(Transport{
		Name:        "wsmux-eventloop",
		Multiplexed: true,
		Description: "wsmux as \"wsmux\" with Config.Driver = mux.DriverEventLoop on both ends (epoll, worker pool, timer wheel)",
		MaxStreams:  wsmuxMaxStreams,
		Pair:        wsmuxEventLoopPair,
	})
	Register(Transport{
		Name:        "wsmux-httpstream-eventloop",
		Multiplexed: true,
		Description: "wsmux-httpstream with Config.Driver = mux.DriverEventLoop on both ends; bulk workloads only",
		MaxStreams:  wsmuxMaxStreams,
		Workloads:   []string{"Bulk1", "Bulk1Read"},
		Pair: func(tb testing.TB, n Net) (client, server Session, cleanup func()) {
			return wsmuxHTTPStreamPairWith(tb, n, "wsmux-httpstream-eventloop", wsmuxEventLoopConfig)
		},
	})
}

func wsmuxEventLoopConfig() *mux.Config {
	c := wsmuxConfig()
	c.Driver = mux.DriverEventLoop
	return c
}

func wsmuxEventLoopPair(tb testing.TB, n Net) (client, server Session, cleanup func()) {
	return wsmuxPairWith(tb, n, "wsmux-eventloop", wsmuxEventLoopConfig)
}
