// A goroutine per request whose handler recurses 2,000 calls deep: each new goroutine starts on a small
// stack, and the runtime grows it by copying (runtime.morestack -> newstack -> copystack) at each doubling.
//
//	stackgrow [REQUESTS]
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

//go:noinline
func depth(n int, pad [64]byte) int {
	if n == 0 {
		return int(pad[3])
	}
	pad[n%64]++
	return depth(n-1, pad) + 1
}

func main() {
	n := 8000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	sem := make(chan struct{}, 4)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			var pad [64]byte
			r := depth(2000+i%7, pad)
			mu.Lock()
			total += r
			mu.Unlock()
			<-sem
		}(i)
	}
	wg.Wait()
	fmt.Println(total)
}
