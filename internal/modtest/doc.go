// Package modtest checks the module boundaries of docs/modules.md from a
// user's side: its tests write fresh consumer modules that import one wsmux
// module each, resolve them with the go command against this checkout, and
// assert what the consumer's build graph holds. It is a module of its own,
// so that golang.org/x/mod (which packs the checkout's modules into a local
// module proxy, as tags would publish them) enters no other module's graph.
//
// It has no library code; nothing imports it.
package modtest
