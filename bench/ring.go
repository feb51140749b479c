package bench

// ring is a fixed-capacity FIFO that overwrites its oldest element: every series the dashboard
// keeps lives in one, so memory stays flat however long the session runs. Not safe for
// concurrent use: its owner's lock guards it.
type ring[T any] struct {
	buf   []T // len == capacity once full
	start int // index of the oldest element
	n     int // elements held
}

func newRing[T any](capacity int) *ring[T] { return &ring[T]{buf: make([]T, capacity)} }

// push appends v, dropping the oldest element when full.
func (r *ring[T]) push(v T) {
	if len(r.buf) == 0 {
		return
	}
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = v
		r.n++
		return
	}
	r.buf[r.start] = v
	r.start = (r.start + 1) % len(r.buf)
}

// at returns the i-th element, oldest first.
func (r *ring[T]) at(i int) T { return r.buf[(r.start+i)%len(r.buf)] }

func (r *ring[T]) len() int { return r.n }

// slice copies the elements out, oldest first.
func (r *ring[T]) slice() []T {
	out := make([]T, r.n)
	for i := range out {
		out[i] = r.at(i)
	}
	return out
}
