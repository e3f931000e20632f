// A Go program that computes and allocates little: nothing material to find.
package main

import "fmt"

func main() {
	s := 0
	for i := 0; i < 300000000; i++ {
		s += i % 7
	}
	fmt.Println(s)
}
