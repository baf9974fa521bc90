// A Go guest for forkvm's differential tests: goroutines, channels, a
// WaitGroup, timers, time.Sleep, the GC under allocation load, and reading
// a file given as the first argument.
package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
	"time"
)

func main() {
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for i := 0; i < 1000; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			mu.Lock()
			total += i
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	fmt.Println("goroutines:", total)

	ch := make(chan int, 4)
	go func() {
		for i := 1; i <= 100; i++ {
			ch <- i
		}
		close(ch)
	}()
	sum := 0
	for v := range ch {
		sum += v
	}
	fmt.Println("channel sum:", sum)

	start := time.Now()
	time.Sleep(20 * time.Millisecond)
	t := time.NewTimer(10 * time.Millisecond)
	<-t.C
	select {
	case <-time.After(5 * time.Millisecond):
	}
	fmt.Println("slept at least 35ms:", time.Since(start) >= 35*time.Millisecond)

	// Allocation load: the GC must run and keep what is live.
	var keep [][]byte
	for i := 0; i < 2000; i++ {
		b := make([]byte, 64<<10)
		b[0] = byte(i)
		if i%100 == 0 {
			keep = append(keep, b)
		}
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Println("kept:", len(keep), "gc ran:", ms.NumGC > 0)

	words := []string{"pear", "fig", "apple"}
	sort.Strings(words)
	fmt.Println(words)

	if len(os.Args) > 1 {
		data, err := os.ReadFile(os.Args[1])
		if err != nil {
			fmt.Println("read error:", err)
			os.Exit(1)
		}
		fmt.Printf("file: %d bytes, sha256 %x\n", len(data), sha256.Sum256(data))
	}
}
