module forkvm/goproxy

go 1.21
