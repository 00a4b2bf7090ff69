//go:build gofuzz

package fuzz

// The names differ from the native targets FuzzSession and FuzzSessionPair,
// which live in this package's _test.go files: a build with -tags gofuzz, as
// OSS-Fuzz's compile_native_go_fuzzer_v2 does, must see both.

// FuzzSessionRealTime is the go-fuzz entry point for Session, in real time (go-fuzz
// has no synctest bubble): waits are shortened and a watchdog panics on a
// hang. It panics on a violation, returns 1 for inputs that ran at least
// one operation and 0 otherwise.
func FuzzSessionRealTime(data []byte) int {
	if err := Session(data, Clock{RealTime: true}); err != nil {
		panic(err)
	}
	if len(data) > 2 {
		return 1
	}
	return 0
}

// FuzzSessionPairRealTime is the go-fuzz entry point for SessionPair, in real time.
func FuzzSessionPairRealTime(data []byte) int {
	if err := SessionPair(data, Clock{RealTime: true}); err != nil {
		panic(err)
	}
	if len(data) > 4 {
		return 1
	}
	return 0
}
