package record

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"rosetop/bench"
)

// fill sets every field reachable from v to a value that is not zero and differs from the other
// fields' (a counter from seed): strings, numbers, bools, times, slices of two, pointers, maps.
// A slice within an item of a slice of its own type is left empty: a recursive type (a fleet's
// Members, each a ServerMetrics with Members of its own) is filled one level deep.
func fill(v reflect.Value, seed *int) { fillIn(v, seed, map[reflect.Type]bool{}) }

// fillIn is fill with the slice types whose items are being filled (filling holds them).
func fillIn(v reflect.Value, seed *int, filling map[reflect.Type]bool) {
	*seed++
	n := *seed
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1_700_000_000+int64(n), int64(n))))
			return
		}
		for i := range v.NumField() {
			fillIn(v.Field(i), seed, filling)
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillIn(p.Elem(), seed, filling)
		v.Set(p)
	case reflect.Slice:
		if filling[v.Type()] {
			v.SetZero()
			return
		}
		filling[v.Type()] = true
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fillIn(s.Index(i), seed, filling)
		}
		v.Set(s)
		delete(filling, v.Type())
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillIn(k, seed, filling)
		fillIn(e, seed, filling)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(n))
	case reflect.Uint64, reflect.Uint32, reflect.Uint:
		v.SetUint(uint64(n))
	case reflect.Float64:
		v.SetFloat(float64(n) + 0.5)
	default:
		panic("fill: add a case for " + v.Kind().String() + " (" + v.Type().String() + ")")
	}
}

// diffValues returns the first difference between a and b ("" when equal): floats by their bits
// (NaN equals NaN), times by Equal, a nil slice or map equal to an empty one.
func diffValues(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Struct:
		if a.Type() == reflect.TypeFor[time.Time]() {
			if !a.Interface().(time.Time).Equal(b.Interface().(time.Time)) {
				return fmt.Sprintf("%s: %v != %v", path, a, b)
			}
			return ""
		}
		for i := range a.NumField() {
			if d := diffValues(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); d != "" {
				return d
			}
		}
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return path + ": nil against non-nil"
			}
			return ""
		}
		return diffValues(a.Elem(), b.Elem(), path)
	case reflect.Slice:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: %d items against %d", path, a.Len(), b.Len())
		}
		for i := range a.Len() {
			if d := diffValues(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
	case reflect.Map:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: %d keys against %d", path, a.Len(), b.Len())
		}
		for _, k := range a.MapKeys() {
			if !b.MapIndex(k).IsValid() {
				return fmt.Sprintf("%s[%v]: missing", path, k)
			}
			if d := diffValues(a.MapIndex(k), b.MapIndex(k), fmt.Sprintf("%s[%v]", path, k)); d != "" {
				return d
			}
		}
	case reflect.Float64:
		if math.Float64bits(a.Float()) != math.Float64bits(b.Float()) {
			return fmt.Sprintf("%s: %v != %v", path, a.Float(), b.Float())
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			return fmt.Sprintf("%s: %v != %v", path, a, b)
		}
	}
	return ""
}

func viewDiff(a, b *bench.View) string {
	return diffValues(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem(), "View")
}

// filledView is a View with every field set (see fill); the playback, which a recording never
// holds, left nil.
func filledView(seed int) *bench.View {
	v := &bench.View{}
	fill(reflect.ValueOf(v).Elem(), &seed)
	v.Replay = nil
	return v
}

// Every field of bench.View and of the types it holds goes through a recording: a first frame
// (everything new) and a second one where every field changed. A field added to bench without
// its place in codec.go fails here.
func TestEveryViewFieldRecorded(t *testing.T) {
	var ve viewEncoder
	var vd viewDecoder
	for i, v := range []*bench.View{filledView(0), filledView(1000), filledView(1000)} {
		var e enc
		ve.encode(&e, v)
		got, err := vd.decode(e.b)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if d := viewDiff(v, got); d != "" {
			t.Fatalf("frame %d: %s: is the field written and read in record/codec.go?", i, d)
		}
	}
}

// Special values keep their bits: NaN, infinities, negative zero; the zero time stays zero.
func TestSpecialValues(t *testing.T) {
	tests := []struct {
		name string
		v    float64
	}{{"nan", math.NaN()}, {"+inf", math.Inf(1)}, {"-inf", math.Inf(-1)}, {"-0", math.Copysign(0, -1)}, {"max", math.MaxFloat64}, {"tiny", math.SmallestNonzeroFloat64},
		{"ms of a duration", float64(1234567*time.Nanosecond) / 1e6}, {"zero", 0}, {"negative ms", -1.5}, {"ms of an hour", float64(time.Hour) / 1e6}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e enc
			e.float(tc.v)
			e.msValue(tc.v)
			e.time(time.Time{})
			d := dec{b: e.b, budget: new(int)}
			if got := d.float(); math.Float64bits(got) != math.Float64bits(tc.v) {
				t.Errorf("float %v came back as %v", tc.v, got)
			}
			if got := d.msValue(); math.Float64bits(got) != math.Float64bits(tc.v) {
				t.Errorf("ms value %v came back as %v", tc.v, got)
			}
			if got := d.time(); !got.IsZero() {
				t.Errorf("the zero time came back as %v", got)
			}
		})
	}
}

// A record read by a decoder that knows fewer fields skips the rest; one that knows more finds
// them zero: how the format grows without a version change.
func TestRecordGrows(t *testing.T) {
	var e enc
	e.record(func(e *enc) { e.int(7); e.string("new field") })
	e.int(9) // the next field of the parent
	d := dec{b: e.b}
	r := d.record()
	if got := r.int(); got != 7 {
		t.Fatalf("first field %d, want 7", got)
	}
	d.done(&r)
	if got := d.int(); got != 9 {
		t.Fatalf("after a record with a field unknown to the reader: %d, want 9", got)
	}
	var old enc
	old.record(func(e *enc) { e.int(7) })
	d = dec{b: old.b}
	r = d.record()
	if a, b := r.int(), r.string(); a != 7 || b != "" || r.err != nil {
		t.Fatalf("an older record: %d %q %v, want 7, \"\", no error", a, b, r.err)
	}
	var long enc // a record over 127 bytes takes a longer length prefix
	long.record(func(e *enc) { e.string(strings.Repeat("x", 300)) })
	d = dec{b: long.b}
	r = d.record()
	if s := r.string(); len(s) != 300 || len(d.b) != 0 {
		t.Fatalf("a long record: %d bytes, %d left over", len(s), len(d.b))
	}
}

// Values in runs expand beyond their bytes: a frame may hold at most its budget of them, so a
// few crafted bytes cannot make the reader allocate gigabytes.
func TestRunBudget(t *testing.T) {
	tests := []struct {
		name string
		n    int
		ok   bool
	}{{"a lockstep ring", 512, true}, {"the budget of a small frame", frameBudget(16) / 8, true}, {"a bomb", 1 << 30, false}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e enc
			e.uvarint(uint64(tc.n)) // one run of n equal values
			e.uvarint(uint64(tc.n))
			e.msValue(1.5)
			budget := frameBudget(16)
			d := dec{b: e.b, budget: &budget}
			got := decRuns(&d)
			if ok := d.err == nil; ok != tc.ok || (ok && len(got) != tc.n) {
				t.Fatalf("%d values in one run: %d decoded, err %v; want ok=%v", tc.n, len(got), d.err, tc.ok)
			}
		})
	}
}
