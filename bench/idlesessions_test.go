package bench

import "testing"

// BenchmarkIdleSessions: heap+stack and goroutines per idle session (one
// connection, one idle stream, one byte each way), both ends in this
// process, for every transport: BenchmarkIdleSessions/transport=<t>.
//
//	go test -run '^$' -bench IdleSessions -benchtime 1x .
func BenchmarkIdleSessions(b *testing.B) {
	for _, tr := range All() {
		b.Run("transport="+tr.Name, func(b *testing.B) { IdleSessions(b, tr) })
	}
}
