// Package loopback makes connected pairs of loopback TCP connections for
// tests, fuzz harnesses and benchmarks: both ends of one real socket, so
// the code under test takes the paths that only plain sockets get (vectored
// writes, interruptible reads). It imports nothing of the project.
package loopback

import "net"

// Pair returns both ends of a new TCP connection on 127.0.0.1, the dialing
// end first. The listener is closed before Pair returns.
func Pair() (client, server net.Conn, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		ch <- result{c, err}
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		ln.Close() // ends the Accept
		<-ch
		return nil, nil, err
	}
	r := <-ch
	if r.err != nil {
		client.Close()
		return nil, nil, r.err
	}
	return client, r.c, nil
}
