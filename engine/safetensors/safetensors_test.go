package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
)

// entry describes one tensor for build.
type entry struct {
	name  string
	dtype string
	shape []int
	data  []byte
}

// build writes a safetensors image: entries laid out back to back, header padded with spaces so
// that the data section starts 8-byte aligned (as the reference writer does) unless pad < 0.
func build(t testing.TB, entries []entry, pad int) []byte {
	t.Helper()
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	for _, e := range entries {
		hdr[e.name] = map[string]any{"dtype": e.dtype, "shape": e.shape,
			"data_offsets": []int{len(data), len(data) + len(e.data)}}
		data = append(data, e.data...)
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	if pad >= 0 {
		for (8+len(js)+pad)%8 != 0 {
			js = append(js, ' ')
		}
	}
	return assemble(js, data)
}

// assemble joins a raw header and data with the 8-byte length prefix.
func assemble(hdr, data []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	return append(append(out, hdr...), data...)
}

func f32bytes(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func u16bytes(v ...uint16) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint16(b, x)
	}
	return b
}

func writeTemp(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestF16HandValues(t *testing.T) {
	cases := []struct {
		name string
		bits uint16
		want float32
	}{
		{"one", 0x3c00, 1},
		{"minus two", 0xc000, -2},
		{"one third", 0x3555, 0.333251953125}, // 1 + 341/1024 over 4
		{"max normal", 0x7bff, 65504},
		{"min normal", 0x0400, 1.0 / 16384},                  // 2^-14
		{"min subnormal", 0x0001, 5.9604644775390625e-08},    // 2^-24
		{"max subnormal", 0x03ff, 6.0975551605224609375e-05}, // 1023 * 2^-24
		{"mid subnormal", 0x8200, -3.0517578125e-05},         // -512 * 2^-24
		{"pi", 0x4248, 3.140625},                             // 2 * (1 + 584/1024)
		{"plus inf", 0x7c00, float32(math.Inf(1))},
		{"minus inf", 0xfc00, float32(math.Inf(-1))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := F16ToF32(c.bits); got != c.want {
				t.Fatalf("F16ToF32(%#04x) = %g, want %g", c.bits, got, c.want)
			}
		})
	}
	if z := F16ToF32(0x8000); z != 0 || !math.Signbit(float64(z)) {
		t.Errorf("F16ToF32(0x8000) = %g, want -0", z)
	}
	if n := F16ToF32(0x7e00); !math.IsNaN(float64(n)) {
		t.Errorf("F16ToF32(0x7e00) = %g, want NaN", n)
	}
}

// TestF16Exhaustive checks all 65536 halves against the definition evaluated in float64.
func TestF16Exhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		s, e, f := float64(1), int(h>>10)&0x1f, float64(h&0x3ff)
		if h&0x8000 != 0 {
			s = -1
		}
		var want float64
		switch {
		case e == 0x1f && f == 0:
			want = math.Inf(int(s))
		case e == 0x1f:
			if got := F16ToF32(h); !math.IsNaN(float64(got)) {
				t.Fatalf("%#04x: got %g, want NaN", h, got)
			}
			continue
		case e == 0:
			want = s * math.Ldexp(f, -24)
		default:
			want = s * math.Ldexp(1+f/1024, e-15)
		}
		got := F16ToF32(h)
		if float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
			t.Fatalf("%#04x: got %g, want %g", h, got, want)
		}
	}
}

func TestBF16(t *testing.T) {
	for _, c := range []struct {
		bits uint16
		want float32
	}{{0x3f80, 1}, {0xc049, -3.140625}, {0x0000, 0}, {0x7f80, float32(math.Inf(1))}} {
		if got := BF16ToF32(c.bits); got != c.want {
			t.Errorf("BF16ToF32(%#04x) = %g, want %g", c.bits, got, c.want)
		}
	}
}

func TestOpenFloat32Aliases(t *testing.T) {
	vals := []float32{1.5, -2, 0.25, 3e-8, 7, 8}
	p := writeTemp(t, build(t, []entry{
		{"a", "F32", []int{2, 3}, f32bytes(vals...)},
		{"h", "F16", []int{2}, u16bytes(0x3c00, 0xc000)},
		{"b", "BF16", []int{1}, u16bytes(0x3f80)},
		{"s", "F32", []int{}, f32bytes(42)},
		{"empty", "F32", []int{0, 5}, nil},
	}, 0))
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := strings.Join(f.Names(), ","); got != "a,b,empty,h,s" {
		t.Fatalf("Names() = %s", got)
	}
	if f.Metadata()["format"] != "pt" {
		t.Errorf("Metadata() = %v", f.Metadata())
	}
	ta, _ := f.Tensor("a")
	a, err := f.Float32("a")
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.Pointer(&a[0]) != unsafe.Pointer(&ta.Data[0]) || !Aliases(ta) {
		t.Fatal("aligned F32 tensor was copied, want it aliased to the map")
	}
	for i := range vals {
		if a[i] != vals[i] {
			t.Fatalf("a[%d] = %g, want %g", i, a[i], vals[i])
		}
	}
	for name, want := range map[string][]float32{"h": {1, -2}, "b": {1}, "s": {42}, "empty": {}} {
		got, err := f.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: len %d, want %d", name, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s[%d] = %g, want %g", name, i, got[i], want[i])
			}
		}
	}
	if _, err := f.Float32("nope"); !errors.Is(err, ErrNoTensor) {
		t.Errorf("Float32(nope) = %v, want ErrNoTensor", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestUnalignedCopies: an F32 tensor at an odd address is converted, not aliased.
func TestUnalignedCopies(t *testing.T) {
	img := build(t, []entry{{"x", "F32", []int{2}, f32bytes(1, 2)}}, 0)
	buf := make([]byte, len(img)+1)
	copy(buf[1:], img) // shift everything by one byte: Go allocations are 8-aligned
	f, err := FromBytes("shifted", buf[1:])
	if err != nil {
		t.Fatal(err)
	}
	tx, _ := f.Tensor("x")
	if Aliases(tx) {
		t.Fatal("Aliases reports true for an unaligned tensor")
	}
	x, err := f.Float32("x")
	if err != nil || x[0] != 1 || x[1] != 2 {
		t.Fatalf("Float32 = %v, %v; want [1 2]", x, err)
	}
}

// TestDecodeChunks: decoding a tensor in chunks of any size gives Float32's values, for every
// dtype; a range outside the tensor is an error, not a panic.
func TestDecodeChunks(t *testing.T) {
	f, err := FromBytes("chunks", build(t, []entry{
		{"f32", "F32", []int{7}, f32bytes(1, -2, 0.5, 3e-8, 7, 65504, -0.25)},
		{"f16", "F16", []int{7}, u16bytes(0x3c00, 0xc000, 0x3800, 0x0001, 0x4700, 0x7bff, 0x7c00)},
		{"bf16", "BF16", []int{7}, u16bytes(0x3f80, 0xc000, 0x3f00, 0x7fc0, 0x40e0, 0xff80, 0x0001)},
	}, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range f.Names() {
		tn, _ := f.Tensor(name)
		want, err := f.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, chunk := range []int{1, 2, 3, 7} {
			got := make([]float32, tn.Numel())
			for first := 0; first < len(got); first += chunk {
				if err := tn.Decode(got[first:min(first+chunk, len(got))], first); err != nil {
					t.Fatalf("%s chunk %d at %d: %v", name, chunk, first, err)
				}
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Errorf("%s chunk %d: [%d] = %g, Float32 gives %g", name, chunk, i, got[i], want[i])
				}
			}
		}
		for _, r := range [][2]int{{-1, 1}, {6, 2}, {8, 0}, {0, 8}} {
			if err := tn.Decode(make([]float32, r[1]), r[0]); err == nil {
				t.Errorf("%s: Decode(%d elements at %d) succeeded outside 7 elements", name, r[1], r[0])
			}
		}
	}
}

func TestBadFiles(t *testing.T) {
	good := func(dtype string, shape []int, off [2]int) []byte {
		hdr, _ := json.Marshal(map[string]any{"w": map[string]any{"dtype": dtype, "shape": shape, "data_offsets": off}})
		return assemble(hdr, make([]byte, 16))
	}
	hugeLen := binary.LittleEndian.AppendUint64(nil, 1<<62)
	cases := []struct {
		name string
		img  []byte
		want error
		msg  string
	}{
		{"empty", nil, ErrInvalid, "shorter than the 8-byte"},
		{"short", []byte{1, 2, 3}, ErrInvalid, "shorter than the 8-byte"},
		{"header longer than file", append(hugeLen, '{', '}'), ErrInvalid, "exceeds the 2 bytes"},
		{"header not json", assemble([]byte("{nope"), nil), ErrInvalid, "header JSON"},
		{"header not object", assemble([]byte("[1,2]"), nil), ErrInvalid, "not a JSON object"},
		{"header blank", assemble([]byte("   "), nil), ErrInvalid, "not a JSON object"},
		{"entry not object", assemble([]byte(`{"w":5}`), nil), ErrInvalid, `tensor "w"`},
		{"metadata not strings", assemble([]byte(`{"__metadata__":{"a":1}}`), nil), ErrInvalid, "__metadata__"},
		{"no dtype", assemble([]byte(`{"w":{"shape":[1],"data_offsets":[0,4]}}`), make([]byte, 4)), ErrInvalid, "no dtype"},
		{"no shape", assemble([]byte(`{"w":{"dtype":"F32","data_offsets":[0,4]}}`), make([]byte, 4)), ErrInvalid, "no shape"},
		{"one offset", assemble([]byte(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}}`), make([]byte, 4)), ErrInvalid, "want 2"},
		{"begin after end", good("F32", []int{1}, [2]int{8, 4}), ErrInvalid, "begin after end"},
		{"end beyond data", good("F32", []int{8}, [2]int{0, 32}), ErrInvalid, "beyond the 16-byte data section"},
		{"size mismatch", good("F32", []int{3}, [2]int{0, 8}), ErrInvalid, "needs 12"},
		{"negative dim", assemble([]byte(`{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`), make([]byte, 4)), ErrInvalid, "negative"},
		{"overflowing shape", good("F32", []int{1 << 40, 1 << 40, 1 << 40}, [2]int{0, 16}), ErrInvalid, "shape"},
		{"unknown dtype", good("Q4_0", []int{2}, [2]int{0, 16}), ErrUnsupportedDType, `tensor "w" has dtype "Q4_0"`},
		{"sub-byte dtype", good("F4", []int{2}, [2]int{0, 1}), ErrUnsupportedDType, `tensor "w" has dtype "F4"`},
		{"BOOL size mismatch", good("BOOL", []int{4, 4}, [2]int{0, 15}), ErrInvalid, "shape [4 4] of BOOL needs 16"},
		{"I64 size mismatch", good("I64", []int{2}, [2]int{0, 8}), ErrInvalid, "shape [2] of I64 needs 16"},
		{"overlap", assemble([]byte(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`), make([]byte, 16)), ErrInvalid, "overlap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := FromBytes("bad.safetensors", c.img)
			if err == nil {
				t.Fatalf("FromBytes succeeded with %d tensors", len(f.Names()))
			}
			if !errors.Is(err, c.want) {
				t.Errorf("error %q does not wrap %v", err, c.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, "bad.safetensors") || !strings.Contains(msg, c.msg) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line naming the file and containing %q", msg, c.msg)
			}
		})
	}
}

// TestNonFloatDTypes: a file holding tensors Decode does not convert still parses (GPT-2 files
// saved by transformers 4.x keep h.N.attn.bias as BOOL or U8, see modeling_gpt2.py's
// register_buffer("bias", ...)); their byte ranges are checked, and asking for their values as
// float32 is an error naming the tensor and its dtype.
func TestNonFloatDTypes(t *testing.T) {
	f, err := FromBytes("mixed.safetensors", build(t, []entry{
		{"h.0.attn.bias", "BOOL", []int{1, 1, 2, 2}, []byte{1, 0, 1, 1}},
		{"h.0.attn.mask", "U8", []int{3}, []byte{1, 2, 3}},
		{"ids", "I64", []int{2}, make([]byte, 16)},
		{"f64", "F64", []int{1}, make([]byte, 8)},
		{"w", "F32", []int{2}, f32bytes(1, 2)},
	}, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.Names(), ","); got != "f64,h.0.attn.bias,h.0.attn.mask,ids,w" {
		t.Fatalf("Names() = %s", got)
	}
	for _, name := range []string{"h.0.attn.bias", "h.0.attn.mask", "ids", "f64"} {
		tn, _ := f.Tensor(name)
		if len(tn.Data) != tn.Numel()*tn.DType.Size() || tn.DType.Float() {
			t.Errorf("%s: %d bytes for %v of %s (Float %v)", name, len(tn.Data), tn.Shape, tn.DType, tn.DType.Float())
		}
		_, err := f.Float32(name)
		if !errors.Is(err, ErrUnsupportedDType) || !strings.Contains(err.Error(), "mixed.safetensors") ||
			!strings.Contains(err.Error(), fmt.Sprintf("tensor %q has dtype %s", name, tn.DType)) {
			t.Errorf("Float32(%s) = %v; want ErrUnsupportedDType naming the file, tensor and dtype", name, err)
		}
		if err := tn.Decode(make([]float32, 1), 0); !errors.Is(err, ErrUnsupportedDType) {
			t.Errorf("Decode(%s) = %v; want ErrUnsupportedDType", name, err)
		}
	}
	if w, err := f.Float32("w"); err != nil || w[1] != 2 {
		t.Errorf("Float32(w) = %v, %v; want [1 2]", w, err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.safetensors")); !errors.Is(err, os.ErrNotExist) ||
		strings.Count(err.Error(), "missing.safetensors") != 1 {
		t.Errorf("Open(missing) = %v; want ErrNotExist naming the path once", err)
	}
	if _, err := Open(dir); err == nil {
		t.Error("Open(directory) succeeded")
	}
	trunc := build(t, []entry{{"x", "F32", []int{4}, f32bytes(1, 2, 3, 4)}}, 0)
	p := writeTemp(t, trunc[:len(trunc)-3])
	if _, err := Open(p); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), p) {
		t.Errorf("Open(truncated) = %v; want ErrInvalid naming %s", err, p)
	}
	if _, err := Open(writeTemp(t, nil)); !errors.Is(err, ErrInvalid) {
		t.Errorf("Open(empty file) = %v; want ErrInvalid", err)
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add(build(f, []entry{{"x", "F32", []int{2}, f32bytes(1, 2)}, {"h", "F16", []int{1}, u16bytes(0x3c00)}}, 0))
	f.Add(build(f, []entry{{"b", "BF16", []int{1, 1}, u16bytes(0x3f80)}}, -1))
	f.Add(assemble([]byte(`{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`), nil))
	f.Add(assemble([]byte(`{"__metadata__":{"k":"v"}}`), nil))
	f.Add(build(f, []entry{{"h.0.attn.bias", "BOOL", []int{1, 1, 2, 2}, []byte{1, 0, 1, 1}}, {"i", "I64", []int{1}, make([]byte, 8)}}, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := FromBytes("fuzz", b)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		for _, name := range file.Names() {
			tn, _ := file.Tensor(name)
			if len(tn.Data) != tn.Numel()*tn.DType.Size() {
				t.Fatalf("%q: %d bytes for shape %v of %s", name, len(tn.Data), tn.Shape, tn.DType)
			}
			v, err := file.Float32(name)
			if !tn.DType.Float() {
				if !errors.Is(err, ErrUnsupportedDType) {
					t.Fatalf("Float32(%q) of dtype %s = %v, want ErrUnsupportedDType", name, tn.DType, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("Float32(%q) on a parsed file: %v", name, err)
			}
			if len(v) != tn.Numel() {
				t.Fatalf("%q: %d values, %d bytes for shape %v", name, len(v), len(tn.Data), tn.Shape)
			}
		}
	})
}
