package engine

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// countJob records which items were handed out and by which workers.
type countJob struct {
	hits    []atomic.Int32
	threads int
	badW    atomic.Int32
}

func (j *countJob) do(w, lo, hi int) {
	if w < 0 || w >= j.threads {
		j.badW.Add(1)
	}
	for i := lo; i < hi; i++ {
		j.hits[i].Add(1)
	}
}

func TestWorkerPoolCoversEveryItemOnce(t *testing.T) {
	for _, threads := range []int{1, 2, 5} {
		p := newWorkerPool(threads)
		for _, total := range []int{0, 1, 7, 100} {
			for _, grain := range []int{0, 1, 3, 64} {
				t.Run(fmt.Sprintf("threads=%d/total=%d/grain=%d", threads, total, grain), func(t *testing.T) {
					for round := range 3 { // the same pool, several jobs in a row
						j := &countJob{hits: make([]atomic.Int32, total), threads: threads}
						p.run(j, total, grain)
						for i := range j.hits {
							if n := j.hits[i].Load(); n != 1 {
								t.Fatalf("round %d: item %d done %d times, want once", round, i, n)
							}
						}
						if j.badW.Load() != 0 {
							t.Fatalf("round %d: a worker index outside [0, %d)", round, threads)
						}
					}
				})
			}
		}
		p.close()
	}
}
