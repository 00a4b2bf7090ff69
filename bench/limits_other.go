//go:build !unix

package bench

// fdLimit returns 0: no known limit on open files.
func fdLimit() int { return 0 }
