package engine

import (
	"sync"
	"sync/atomic"
)

// poolJob is a unit of parallel work: do handles items [lo, hi) on worker w (0 <= w < threads).
// Jobs are long-lived values owned by the CPU backend, so handing one to the pool allocates nothing.
type poolJob interface {
	do(w, lo, hi int)
}

// workerPool is a fixed set of goroutines that split a range of items between them. The calling
// goroutine works too, so a pool of n threads starts n-1 goroutines. Chunks are claimed from an
// atomic counter: a fast worker takes more chunks, nobody waits on a slow static split.
//
// run is called from one goroutine at a time (the backend's caller, or for the CUDA backend's
// prompt fill the runner's worker during its step); the fields below are written
// by run before it wakes the helpers (the channel send orders them) and read by the helpers until
// they call wg.Done, which run waits for before it returns.
type workerPool struct {
	threads int
	wake    []chan struct{} // one per helper goroutine; a send starts one pass over the current job
	quit    chan struct{}   // closed by close: helpers exit
	wg      sync.WaitGroup  // helpers still working on the current job
	exited  sync.WaitGroup  // helpers not yet exited (close waits for them)

	job   poolJob      // current job; owned by run, read by helpers between wake and wg.Done
	total int          // items in the current job
	grain int          // items per chunk
	next  atomic.Int64 // next unclaimed item
}

func newWorkerPool(threads int) *workerPool {
	if threads < 1 {
		threads = 1
	}
	p := &workerPool{threads: threads, quit: make(chan struct{})}
	p.wake = make([]chan struct{}, threads-1)
	for i := range p.wake {
		p.wake[i] = make(chan struct{}, 1)
		p.exited.Add(1)
		go p.helper(i+1, p.wake[i])
	}
	return p
}

func (p *workerPool) helper(w int, wake <-chan struct{}) {
	defer p.exited.Done()
	for {
		select {
		case <-p.quit:
			return
		case <-wake:
			p.work(w)
			p.wg.Done()
		}
	}
}

// work claims chunks of the current job until none is left.
func (p *workerPool) work(w int) {
	for {
		lo := int(p.next.Add(int64(p.grain))) - p.grain
		if lo >= p.total {
			return
		}
		p.job.do(w, lo, min(lo+p.grain, p.total))
	}
}

// run splits [0, total) into chunks of grain items and returns when all are done.
func (p *workerPool) run(j poolJob, total, grain int) {
	if total <= 0 {
		return
	}
	grain = max(grain, 1)
	chunks := (total + grain - 1) / grain
	helpers := min(len(p.wake), chunks-1)
	if helpers <= 0 {
		j.do(0, 0, total)
		return
	}
	p.job, p.total, p.grain = j, total, grain
	p.next.Store(0)
	p.wg.Add(helpers)
	for i := 0; i < helpers; i++ {
		p.wake[i] <- struct{}{}
	}
	p.work(0)
	p.wg.Wait()
	p.job = nil
}

// split returns a grain that gives each thread about `per` chunks of total items, at least min.
func (p *workerPool) split(total, per, least int) int {
	g := total / (p.threads * per)
	return max(g, least, 1)
}

// close stops the helpers and waits for them to exit.
func (p *workerPool) close() {
	close(p.quit)
	p.exited.Wait()
}
