package jsonkind

import (
	"reflect"
	"testing"
)

func TestName(t *testing.T) {
	var (
		i8  *int8
		u   uint16
		f   float64
		s   []string
		obj struct{ A int }
	)
	for _, c := range []struct {
		v    any
		got  string
		want string
	}{
		{i8, "string", "an integer"},
		{i8, "number 300", "an integer in [-128, 127]"},
		{u, "number -1", "an integer in [0, 65535]"},
		{f, "string", "a number"},
		{f, "number 1e400", "a finite number"},
		{"", "number", "a string"},
		{true, "string", "a boolean"},
		{s, "object", "an array"},
		{obj, "array", "an object"},
	} {
		if got := Name(reflect.TypeOf(c.v), c.got); got != c.want {
			t.Errorf("Name(%T, %q) = %q, want %q", c.v, c.got, got, c.want)
		}
	}
	if !IsWhole("3e2") || IsWhole("2.5") || IsWhole("x") {
		t.Error("IsWhole: 3e2 is whole, 2.5 and x are not")
	}
}
