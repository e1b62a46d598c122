package loadgen

import (
	"sync"
	"sync/atomic"
)

// Parallel runs fn(0..n-1) on workers goroutines and returns the first
// error; after one, each worker stops at its next index.
func Parallel(workers, n int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(workers, max(n, 1)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
