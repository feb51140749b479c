package record

// A list in a view frame is written as a change to the same list in the previous frame:
//
//	new = old[drop : drop+keep] ++ added
//
// which covers what bench publishes: rings that drop their oldest items as they append (tracks,
// events, admissions), lists that append (a ledger) or rewrite their tail (a ledger summing
// later entries), and a list replaced whole (drop = len(old), keep = 0).

// maxCandidates bounds the starting points diff tries: a list of many equal items costs at
// most this many passes, and only its size (never its correctness) depends on the choice.
const maxCandidates = 4

// diff finds drop and keep for new against old with eq; the rest of new is added.
func diff[T any](old, new []T, eq func(a, b *T) bool) (drop, keep int) {
	drop = len(old)
	if len(new) == 0 {
		return drop, 0
	}
	tried := 0
	for d := range old {
		if !eq(&old[d], &new[0]) {
			continue
		}
		k := 1
		if &old[d] == &new[0] { // the same memory (bench shares a track's points between views)
			k = min(len(old)-d, len(new))
		}
		for k < len(old)-d && k < len(new) && eq(&old[d+k], &new[k]) {
			k++
		}
		if k > keep {
			drop, keep = d, k
		}
		if d+k == len(old) { // the whole rest of old: the best there is from here on
			break
		}
		if tried++; tried == maxCandidates {
			break
		}
	}
	return drop, keep
}

func eqComparable[T comparable](a, b *T) bool { return *a == *b }

// series is a decoded list as the decoder extends it: the current list is arr[lo:hi]. Views get
// it with its capacity cut to its length, so appends after hi (in place, when the change keeps
// the whole rest of the old list) write memory no published view can see.
type series[T any] struct {
	arr    []T
	lo, hi int
}

// seriesOf starts a series from a published list: the next change copies it.
func seriesOf[T any](list []T) series[T] {
	return series[T]{arr: list[:len(list):len(list)], hi: len(list)}
}

// list is the current list; nil when empty.
func (s *series[T]) list() []T {
	if s.hi == s.lo {
		return nil
	}
	return s.arr[s.lo:s.hi:s.hi]
}

// apply replaces the list with old[drop:drop+keep] ++ added; false when drop and keep do not
// fit the current list (a corrupt frame).
func (s *series[T]) apply(drop, keep int, added []T) bool {
	n := s.hi - s.lo
	if drop < 0 || keep < 0 || drop > n || keep > n-drop {
		return false
	}
	if drop+keep == n && s.hi+len(added) <= cap(s.arr) {
		s.arr = s.arr[:s.hi+len(added)]
		copy(s.arr[s.hi:], added)
		s.lo += drop
		s.hi += len(added)
		return true
	}
	size := keep + len(added)
	arr := make([]T, size, max(2*size, 16))
	copy(arr, s.arr[s.lo+drop:s.lo+drop+keep])
	copy(arr[keep:], added)
	s.arr, s.lo, s.hi = arr, 0, size
	return true
}

// sealed is the series with its capacity cut: the next change copies it rather than append in
// place (a decoder restored from a checkpoint must not write where other views may read).
func (s series[T]) sealed() series[T] {
	s.arr = s.arr[:s.hi:s.hi]
	return s
}
