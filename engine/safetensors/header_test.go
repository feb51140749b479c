package safetensors

import (
	"errors"
	"strings"
	"testing"
)

// TestEmptyTensors: a tensor with a zero dimension holds no bytes, however large its other
// dimensions, as in the reference reader (the element count is their product, 0).
func TestEmptyTensors(t *testing.T) {
	for _, hdr := range []string{
		`{"e":{"dtype":"F32","shape":[8,0],"data_offsets":[0,0]}}`,
		`{"e":{"dtype":"F32","shape":[1048576,0,3],"data_offsets":[0,0]},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`,
	} {
		f, err := FromBytes("empty.safetensors", assemble([]byte(hdr), make([]byte, 4)))
		if err != nil {
			t.Errorf("%s: %v", hdr, err)
			continue
		}
		e, _ := f.Tensor("e")
		if v, err := f.Float32("e"); err != nil || len(v) != 0 || e.Numel() != 0 || len(e.Data) != 0 {
			t.Errorf("%s: Float32(e) = %v, %v; Numel %d, %d bytes; want no elements", hdr, v, err, e.Numel(), len(e.Data))
		}
	}
}

// TestHeaderStrict: headers that the reference reader refuses, or that different JSON readers
// read differently, are refused with a one-line error naming the file and the problem.
func TestHeaderStrict(t *testing.T) {
	data := make([]byte, 8)
	cases := []struct {
		name, hdr, msg string
	}{
		// Go's JSON reader turns both names into "a\uFFFD", and keeps one tensor.
		{"invalid UTF-8", "{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\xfe\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", "not valid UTF-8"},
		{"duplicate tensor", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, `"a" appears twice`},
		{"duplicate escaped", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"\u0061":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, `"a" appears twice`},
		{"duplicate metadata", `{"__metadata__":{"k":"v"},"__metadata__":{}}`, `"__metadata__" appears twice`},
		{"duplicate field", `{"a":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}}`, `"dtype" appears twice`},
		// Field names are exact: "DTYPE" is not "dtype" (Go's JSON reader would take it as one).
		{"field case", `{"a":{"DTYPE":"F32","shape":[1],"data_offsets":[0,4]}}`, "no dtype"},
		{"trailing data", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} {}`, "header JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := FromBytes("bad.safetensors", assemble([]byte(c.hdr), data))
			if err == nil {
				t.Fatalf("FromBytes succeeded with tensors %q", f.Names())
			}
			msg := err.Error()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(msg, "bad.safetensors") || !strings.Contains(msg, c.msg) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line wrapping ErrInvalid, naming the file and containing %q", msg, c.msg)
			}
		})
	}
	// A field other than dtype, shape and data_offsets is ignored, in any case, as in the reference.
	f, err := FromBytes("ok.safetensors", assemble([]byte(`{"a":{"dtype":"F32","Dtype":"F16","shape":[1],"data_offsets":[0,4],"extra":1}}`), data[:4]))
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := f.Tensor("a"); a.DType != F32 {
		t.Errorf("dtype %s, want F32 (the field spelled \"dtype\")", a.DType)
	}
}
