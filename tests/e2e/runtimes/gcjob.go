// A job runner in a garbage-collected runtime, statically linked (no malloc, no preload): every
// job allocates 64 MiB, and debug.FreeOSMemory returns the heap to the kernel (madvise DONTNEED)
// after each, so the next job faults it all in again.
package main

import (
	"fmt"
	"runtime/debug"
)

func job(n int) int {
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = byte(n)
	}
	s := 0
	for i := 0; i < len(buf); i += 4096 {
		s += int(buf[i])
	}
	return s
}

func main() {
	t := 0
	for i := 0; i < 40; i++ {
		t += job(i)
		debug.FreeOSMemory()
	}
	fmt.Println(t)
}
