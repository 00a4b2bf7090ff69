// Package fuzz holds the fuzz harnesses of wsmux, shared by native go test
// -fuzz targets and go-fuzz (build tag gofuzz) Fuzz(data []byte) int
// functions.
package fuzz
