module forkvm.test/go_server

go 1.21
