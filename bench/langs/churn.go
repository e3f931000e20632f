// STEPS jobs of fixed work: a 32 MiB slice per job, written page by page and dropped.
package main

import (
	"fmt"
	"os"
	"strconv"
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
	steps := 100
	if len(os.Args) > 1 {
		steps, _ = strconv.Atoi(os.Args[1])
	}
	total := 0
	for n := 0; n < steps; n++ {
		total += job(n)
	}
	fmt.Println(total)
}
