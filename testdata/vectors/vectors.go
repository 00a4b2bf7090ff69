// Package vectors carries the WSMUX/1 test vectors of this directory (JSON
// with hex bytes, described in README.md) so that the wsmux conformance
// command can run them wherever it is installed. The JSON files are the
// vectors; this file only embeds them and holds no rule of its own.
package vectors

import _ "embed"

// Conversations is conversations.json: the scripted sessions the
// conformance runner plays against a WSMUX/1 endpoint.
//
//go:embed conversations.json
var Conversations []byte
