// A service with a large pointer-rich live heap (a million linked nodes) that allocates small
// pointer-holding objects per request: with a low GOGC the collector runs often and traces the
// whole live heap each time, so most of the CPU time is the collector's, in user mode.
package main

import "fmt"

var sink []*node

type node struct {
	next *node
	val  [4]int
	kids []*node
}

func main() {
	live := make([]*node, 0, 1<<20)
	for i := 0; i < 1<<20; i++ {
		live = append(live, &node{val: [4]int{i}})
	}
	for i := 1; i < len(live); i++ {
		live[i].next = live[i-1]
	}
	s := 0
	keep := make([]*node, 512)
	for r := 0; r < 600; r++ {
		for j := 0; j < 20000; j++ {
			n := &node{kids: make([]*node, 8)}
			n.kids[0] = live[(r*20000+j)%len(live)]
			s += n.kids[0].val[0] & 1
			if j%64 == 0 {
				sink = append(sink[:0], n)
			}
			keep[j%len(keep)] = n
		}
	}
	fmt.Println(s)
}
