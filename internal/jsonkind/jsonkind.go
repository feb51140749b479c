// Package jsonkind names, in JSON's terms, the kind of value a Go type decodes from: what an
// encoding/json type error should tell someone who wrote JSON, not Go.
package jsonkind

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// IsWhole reports whether n is a JSON number with no fractional part.
func IsWhole(n string) bool {
	x, err := strconv.ParseFloat(n, 64)
	return err == nil && x == math.Trunc(x)
}

// Name names the JSON value a Go type decodes from, for a user who never saw the Go type (an
// encoding/json UnmarshalTypeError's Type); got is what the input held (its Value: "number 2.5",
// "string", ...). An integer's range is named when got was a whole number outside it.
func Name(t reflect.Type, got string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n, ok := strings.CutPrefix(got, "number "); ok && IsWhole(n) {
			return "an integer in " + intRange(t)
		}
		return "an integer"
	case reflect.Float32, reflect.Float64:
		if strings.HasPrefix(got, "number ") { // a number, but past the float's range
			return "a finite number"
		}
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a JSON value of another type"
}

// intRange is the range of an integer type, as "[lo, hi]".
func intRange(t reflect.Type) string {
	bits := t.Bits()
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
		return fmt.Sprintf("[0, %d]", uint64(math.MaxUint64)>>(64-bits))
	}
	return fmt.Sprintf("[%d, %d]", int64(math.MinInt64)>>(64-bits), int64(math.MaxInt64)>>(64-bits))
}
