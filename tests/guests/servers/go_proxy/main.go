// A net/http server whose handler fetches from a backend, written as any
// Go service would be. Used by crates/forkvm-cli/tests/outbound.rs.
//
//	go_proxy serve PORT BACKEND   listens on 127.0.0.1:PORT; GET /x answers
//	                              "proxied: " + the body of BACKEND/x and
//	                              "count=N" (requests this process served)
//	go_proxy get URL              prints the body of URL (a plain client)
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
)

var served atomic.Int64

func fetch(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("status=%d %s", resp.StatusCode, body), nil
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "get" {
		body, err := fetch(os.Args[2])
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(body)
		return
	}
	if len(os.Args) != 4 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "usage: go_proxy serve PORT BACKEND | go_proxy get URL")
		os.Exit(2)
	}
	backend := os.Args[3]
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		n := served.Add(1)
		body, err := fetch(backend + r.URL.Path)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, "error: %v\n", err)
			return
		}
		fmt.Fprintf(w, "proxied: %s count=%d\n", body, n)
	})
	if err := http.ListenAndServe("127.0.0.1:"+os.Args[2], nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
