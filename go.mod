module github.com/wsmux/wsmux

go 1.26.0

require (
	github.com/gobwas/httphead v0.1.0 // indirect
	github.com/gobwas/ws v1.5.0 // indirect
	github.com/hashicorp/yamux v0.1.2 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/xtaci/smux v1.5.58 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	k8s.io/apimachinery v0.37.2 // indirect
	k8s.io/client-go v0.37.2 // indirect
	k8s.io/streaming v0.37.2 // indirect
)
