package sched

import (
	"slices"
	"testing"
)

func TestDeque(t *testing.T) {
	reqs := make([]*request, 40)
	for i := range reqs {
		reqs[i] = &request{id: RequestID(i)}
	}
	ids := func(q *deque) []RequestID {
		var out []RequestID
		for i := range q.len() {
			out = append(out, q.at(i).id)
		}
		return out
	}
	cases := []struct {
		name string
		ops  func(q *deque)
		want []RequestID
	}{
		{"fifo", func(q *deque) {
			for _, r := range reqs[:3] {
				q.pushBack(r)
			}
		}, []RequestID{0, 1, 2}},
		{"front pushes come first, last pushed first", func(q *deque) {
			q.pushBack(reqs[5])
			q.pushFront(reqs[1])
			q.pushFront(reqs[0])
		}, []RequestID{0, 1, 5}},
		{"pop and removeDone keep order", func(q *deque) {
			for _, r := range reqs[:6] {
				q.pushBack(r)
			}
			q.popFront()
			reqs[3].done, reqs[30].done = true, true // 30 is absent
			q.removeDone()
		}, []RequestID{1, 2, 4, 5}},
		{"wraps and grows", func(q *deque) {
			for _, r := range reqs[:20] {
				q.pushBack(r)
				q.popFront()
			}
			for _, r := range reqs[20:40] {
				q.pushBack(r)
			}
			q.pushFront(reqs[0])
			reqs[21].done, reqs[22].done, reqs[39].done = true, true, true
			q.removeDone()
			q.pushBack(reqs[1])
		}, append(append([]RequestID{0, 20}, seqIDs(23, 39)...), 1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range reqs {
				r.done = false
			}
			var q deque
			c.ops(&q)
			if got := ids(&q); !slices.Equal(got, c.want) {
				t.Fatalf("queue %v, want %v", got, c.want)
			}
			if f := q.front(); f == nil || f.id != c.want[0] {
				t.Fatalf("front %v, want %d", f, c.want[0])
			}
		})
	}
}

func seqIDs(from, to int) []RequestID {
	var out []RequestID
	for i := from; i < to; i++ {
		out = append(out, RequestID(i))
	}
	return out
}

// TestArenaImmutable: slices handed out are never written again, across chunk changes.
func TestArenaImmutable(t *testing.T) {
	a := arena[int]{chunk: 4}
	var taken [][]int
	var want [][]int
	for step := range 10 {
		var w []int
		for i := range step % 4 { // steps of 0-3 items, some larger than what is left of a chunk
			*a.next() = 100*step + i
			w = append(w, 100*step+i)
		}
		got := a.take()
		if len(got) != cap(got) {
			t.Fatalf("step %d: capacity %d beyond length %d: a consumer's append would write into the chunk", step, cap(got), len(got))
		}
		taken, want = append(taken, got), append(want, w)
	}
	for i := range taken {
		if !slices.Equal(taken[i], want[i]) {
			t.Fatalf("step %d: handed out %v, now %v", i, want[i], taken[i])
		}
	}
}
