package record

import (
	"slices"
	"testing"
)

// diff finds how a list changed; applying that change to a series of the old list gives the
// new one, whatever the change, and the common cases cost no added items.
func TestDiffApply(t *testing.T) {
	arr := []int{1, 2, 3, 4, 5, 6, 7, 8}
	tests := []struct {
		name      string
		old, new  []int
		wantAdded int
	}{
		{"unchanged", []int{1, 2, 3}, []int{1, 2, 3}, 0},
		{"appended", []int{1, 2, 3}, []int{1, 2, 3, 4, 5}, 2},
		{"ring slid", []int{1, 2, 3, 4}, []int{3, 4, 5, 6}, 2},
		{"shared memory slid", arr[0:5], arr[2:8], 3},
		{"tail rewritten", []int{1, 2, 3, 4}, []int{1, 2, 3, 9}, 1},
		{"replaced", []int{1, 2, 3}, []int{7, 8}, 2},
		{"emptied", []int{1, 2, 3}, nil, 0},
		{"from empty", nil, []int{1, 2}, 2},
		{"repeats", []int{5, 5, 5, 5}, []int{5, 5, 5, 5, 5}, 1},
		{"many false starts", []int{1, 0, 1, 0, 1, 0, 1, 2}, []int{1, 2, 3}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			drop, keep := diff(tc.old, tc.new, eqComparable)
			if added := len(tc.new) - keep; added != tc.wantAdded {
				t.Errorf("drop %d keep %d: %d added, want %d", drop, keep, added, tc.wantAdded)
			}
			s := seriesOf(slices.Clone(tc.old))
			if !s.apply(drop, keep, tc.new[keep:]) {
				t.Fatalf("apply(%d, %d) refused", drop, keep)
			}
			if got := s.list(); !slices.Equal(got, tc.new) {
				t.Fatalf("applied: %v, want %v", got, tc.new)
			}
		})
	}
}

// A series appends in place after the published list, never into it: a view taken before an
// append keeps its items.
func TestSeriesNeverWritesPublished(t *testing.T) {
	var s series[int]
	s.apply(0, 0, []int{1, 2, 3})
	a := s.list()
	s.apply(1, 2, []int{4}) // slide: in place after a's end
	b := s.list()
	s.apply(0, 1, []int{9}) // tail rewritten: a copy
	if !slices.Equal(a, []int{1, 2, 3}) || !slices.Equal(b, []int{2, 3, 4}) || !slices.Equal(s.list(), []int{2, 9}) {
		t.Fatalf("a %v b %v now %v", a, b, s.list())
	}
	if cap(a) != len(a) || cap(b) != len(b) {
		t.Fatal("a published list has room to append into")
	}
	for _, bad := range [][2]int{{4, 0}, {1, 3}, {-1, 0}} {
		if s.apply(bad[0], bad[1], nil) {
			t.Errorf("apply(%d, %d) on a list of 2 was accepted", bad[0], bad[1])
		}
	}
}
