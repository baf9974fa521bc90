module forkvm.test/goguest

go 1.21
