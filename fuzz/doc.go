// Package fuzz holds the fuzz harnesses of wsmux, shared by native go test
// -fuzz targets and go-fuzz (build tag gofuzz) Fuzz(data []byte) int
// functions. Each harness is an exported function that returns the first
// invariant it finds violated, or nil:
//
//   - DecodeFrame, DecodeMessage, HeaderBlock: the frame codec (native
//     targets in frame/fuzz_test.go); HeaderBlock is a differential against
//     net/http's http.Header semantics. Their bodies are in the subpackage
//     framefuzz, which imports only frame, so frame's tests do not build mux;
//   - FlowProgram: flow-control credit (native target in flow/fuzz_test.go),
//     its body in the subpackage flowfuzz, which imports only flow and
//     internal/program (the program reader every harness here uses, which
//     imports nothing);
//   - Session: a hostile peer's script against a real mux.Session;
//   - SessionPair: two real sessions driven by a random program, every byte
//     checked (both native targets in this package's session_test.go, run in
//     a testing/synctest bubble).
//
// The WebSocket reader's differential target, FuzzWebSocketFrame, is in
// mux/internal/wsio/fuzz_test.go, since this package cannot import an
// internal package of mux; its reference reader is the subpackage wsref.
// docs/fuzzing.md says how to run them all, locally and continuously.
//
// It imports mux, frame, flow and their harness subpackages; nothing but
// tests and fuzzing drivers may import it.
package fuzz
