// A plain net/http server, written as any Go server would be: it knows
// nothing of forkvm. Used by crates/forkvm-cli/tests/servers.rs, natively
// and under `forkvm serve`.
//
//	go_server [PORT]   listens on 127.0.0.1:PORT (default 8080)
//
// Routes: GET / ("hello from go"), GET /count (requests this process served),
// POST /echo (the body), GET /crash (a nil pointer write: the process dies).
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"unsafe"
)

var served atomic.Int64

func main() {
	port := "8080"
	if len(os.Args) > 1 {
		port = os.Args[1]
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("X-Server", "go")
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, "hello from go\n")
		case "/count":
			fmt.Fprintf(w, "count=%d\n", served.Load())
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			w.Write(body)
		case "/crash":
			// A nil write in a goroutine of its own: net/http cannot recover
			// it, so the whole process dies (as a real crash would).
			done := make(chan bool)
			go func() {
				var p *int
				*(*int)(unsafe.Pointer(uintptr(unsafe.Pointer(p)))) = 1
				done <- true
			}()
			<-done
		default:
			http.NotFound(w, r)
		}
	})
	fmt.Printf("listening on 127.0.0.1:%s\n", port)
	if err := http.ListenAndServe("127.0.0.1:"+port, mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
