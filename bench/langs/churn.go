// About SECONDS of work: a 32 MiB slice per job, written page by page and dropped.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

var sink []byte

func job(n int) int {
	b := make([]byte, 32<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = byte(n)
	}
	sink = b
	return int(b[4096])
}

func main() {
	secs := 1.0
	if len(os.Args) > 1 {
		secs, _ = strconv.ParseFloat(os.Args[1], 64)
	}
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	total := 0
	for n := 0; time.Now().Before(end); n++ {
		total += job(n)
	}
	fmt.Println(total)
}
