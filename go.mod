module github.com/wsmux/wsmux

go 1.26.0

require (
	github.com/gobwas/ws v1.5.0
	golang.org/x/sys v0.48.0
)

require github.com/gobwas/httphead v0.1.0 // indirect
