package sched

// deque is the waiting queue: FIFO by submission, with preempted requests pushed back at the front
// so that they resume before anything submitted after them. A ring buffer: no allocation once it
// has grown to the queue's high-water mark.
type deque struct {
	buf  []*request // ring; len(buf) is a power of two or 0
	head int        // index of the front element
	n    int        // elements held
}

func (q *deque) len() int { return q.n }

// at returns the i-th element from the front.
func (q *deque) at(i int) *request { return q.buf[(q.head+i)&(len(q.buf)-1)] }

// front returns the first element, or nil when the queue is empty.
func (q *deque) front() *request {
	if q.n == 0 {
		return nil
	}
	return q.buf[q.head]
}

func (q *deque) pushBack(r *request) {
	q.grow()
	q.buf[(q.head+q.n)&(len(q.buf)-1)] = r
	q.n++
}

func (q *deque) pushFront(r *request) {
	q.grow()
	q.head = (q.head - 1) & (len(q.buf) - 1)
	q.buf[q.head] = r
	q.n++
}

func (q *deque) popFront() *request {
	if q.n == 0 {
		return nil
	}
	r := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
	return r
}

// removeDone deletes the finished requests, keeping the order of the others: one pass, however
// many there are (a mass cancellation ends thousands of waiting requests in one step).
func (q *deque) removeDone() {
	mask, k := len(q.buf)-1, 0
	for i := range q.n {
		if r := q.at(i); !r.done {
			q.buf[(q.head+k)&mask] = r
			k++
		}
	}
	for i := k; i < q.n; i++ {
		q.buf[(q.head+i)&mask] = nil
	}
	q.n = k
}

// grow makes room for one more element.
func (q *deque) grow() {
	if q.n < len(q.buf) {
		return
	}
	buf := make([]*request, max(16, 2*len(q.buf)))
	for i := range q.n {
		buf[i] = q.at(i)
	}
	q.buf, q.head = buf, 0
}

// arena holds per-step slices (events, finished ids) that are handed to consumers, without an
// allocation per step: a step appends into the open tail of a chunk and take() hands that tail out
// with its capacity capped; a chunk is only ever appended to, so a slice handed out is never
// written again. When a chunk fills up, the step's open items move to a fresh chunk and the old one
// lives on for as long as consumers keep slices of it.
type arena[T any] struct {
	buf   []T
	start int // first item of the open (not yet taken) part of buf
	chunk int // items per chunk
}

// next appends a zero item to the open part and returns it to be filled in place (slots of a
// chunk are zero when made and never reused).
func (a *arena[T]) next() *T {
	if len(a.buf) == cap(a.buf) {
		open := a.buf[a.start:]
		buf := make([]T, len(open), max(a.chunk, 2*len(open)))
		copy(buf, open)
		a.buf, a.start = buf, 0
	}
	a.buf = a.buf[:len(a.buf)+1]
	return &a.buf[len(a.buf)-1]
}

// take closes the open part and returns it (nil when empty) with capacity equal to its length,
// so that an append by the consumer reallocates instead of writing into the chunk.
func (a *arena[T]) take() []T {
	n := len(a.buf)
	if a.start == n {
		return nil
	}
	s := a.buf[a.start:n:n]
	a.start = n
	return s
}
