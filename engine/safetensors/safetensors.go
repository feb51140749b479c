// Package safetensors reads the safetensors format: an 8-byte little-endian header length N, N
// bytes of JSON describing each tensor (dtype, shape, byte range), then the tensor data.
//
// Files are memory-mapped read-only, so opening a multi-gigabyte checkpoint costs nothing until
// the bytes are touched, and F32 tensors can be used in place. Every length and offset in the
// header is checked against the file before it is used: a corrupt or hostile file yields an
// error, never a panic or an allocation sized by the attacker.
package safetensors

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"unsafe"

	"rosetop/internal/regular"
)

// Sentinel errors; every error this package returns wraps one of them.
var (
	// ErrInvalid: the file is not well-formed safetensors (truncated, bad header, bad offsets).
	ErrInvalid = errors.New("invalid safetensors file")
	// ErrUnsupportedDType: a tensor's dtype is unknown, or one this reader does not convert to
	// float32 (the tensor's other data are still read and checked).
	ErrUnsupportedDType = errors.New("unsupported safetensors dtype")
	// ErrNoTensor: the requested tensor is not in the file.
	ErrNoTensor = errors.New("no such tensor")
)

// DType is a tensor element type as spelled in the header.
type DType string

// The element types Decode converts to float32.
const (
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
)

// Size is the element size in bytes of the safetensors dtypes of whole bytes, 0 for any other.
// Checkpoints hold more than floats: GPT-2 files saved by some transformers versions keep the
// attention mask buffer (h.N.attn.bias) as BOOL or U8, so those files must parse.
func (d DType) Size() int {
	switch d {
	case "BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3":
		return 1
	case "I16", "U16", F16, BF16:
		return 2
	case "I32", "U32", F32:
		return 4
	case "I64", "U64", "F64":
		return 8
	}
	return 0
}

// Float reports whether Decode converts d to float32.
func (d DType) Float() bool { return d == F32 || d == F16 || d == BF16 }

// Tensor is one tensor of a file. Data aliases the file's bytes: it is read-only and valid until
// the File is closed.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte // len = numel * DType.Size()
}

// Numel is the number of elements (1 for a scalar of shape []).
func (t Tensor) Numel() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is an opened safetensors file. Its methods may be called from any goroutine until Close.
type File struct {
	name     string            // path, or the name given to FromBytes, for error messages
	tensors  map[string]Tensor // immutable after parse
	metadata map[string]string // the "__metadata__" entry
	unmap    func() error      // nil for FromBytes
}

// Open memory-maps path read-only and parses its header. Close unmaps it.
func Open(path string) (*File, error) {
	b, unmap, err := mapFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) { // the path is already in our prefix
			err = pe.Err
		}
		return nil, fmt.Errorf("safetensors %s: %w", path, err)
	}
	f, err := parse(path, b)
	if err != nil {
		_ = unmap()
		return nil, err
	}
	f.unmap = unmap
	return f, nil
}

// FromBytes parses b, which must stay unmodified while the File is used (e.g. go:embed data).
// name labels error messages.
func FromBytes(name string, b []byte) (*File, error) {
	return parse(name, b)
}

// Close releases the memory map. Tensor data and Float32 results that alias it must not be used
// afterwards.
func (f *File) Close() error {
	if f == nil || f.unmap == nil {
		return nil
	}
	u := f.unmap
	f.unmap = nil
	if err := u(); err != nil {
		return fmt.Errorf("safetensors %s: unmap: %w", f.name, err)
	}
	return nil
}

// Name is the path or label the file was opened with.
func (f *File) Name() string { return f.name }

// Tensor returns the named tensor.
func (f *File) Tensor(name string) (Tensor, bool) {
	t, ok := f.tensors[name]
	return t, ok
}

// Names lists the tensor names in sorted order.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.tensors))
	for n := range f.tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Metadata returns the header's "__metadata__" entry (string to string), possibly empty.
func (f *File) Metadata() map[string]string {
	m := make(map[string]string, len(f.metadata))
	for k, v := range f.metadata {
		m[k] = v
	}
	return m
}

// Float32 returns the named tensor as float32 values. For an F32 tensor whose bytes are 4-byte
// aligned on a little-endian machine the result aliases the file (no copy; read-only, valid until
// Close); otherwise the values are converted into a new slice.
func (f *File) Float32(name string) ([]float32, error) {
	t, ok := f.tensors[name]
	if !ok {
		return nil, fmt.Errorf("safetensors %s: tensor %q: %w", f.name, name, ErrNoTensor)
	}
	n := t.Numel()
	if !t.DType.Float() {
		return nil, fmt.Errorf("safetensors %s: tensor %q has dtype %s, want F32, F16 or BF16: %w", f.name, name, t.DType, ErrUnsupportedDType)
	}
	if n == 0 {
		return []float32{}, nil
	}
	if Aliases(t) {
		return unsafe.Slice((*float32)(unsafe.Pointer(&t.Data[0])), n), nil
	}
	out := make([]float32, n)
	if err := t.Decode(out, 0); err != nil {
		return nil, fmt.Errorf("safetensors %s: %w", f.name, err)
	}
	return out, nil
}

// Decode converts elements [first, first+len(dst)) of t to float32 into dst, so that a large
// tensor can be converted in chunks, in parallel.
func (t Tensor) Decode(dst []float32, first int) error {
	if first < 0 || len(dst) > t.Numel()-first {
		return fmt.Errorf("tensor %q: elements [%d, %d) outside its %d", t.Name, first, first+len(dst), t.Numel())
	}
	switch t.DType {
	case F32:
		src := t.Data[4*first:]
		for i := range dst {
			dst[i] = f32frombits(src[4*i:])
		}
	case F16:
		src := t.Data[2*first:]
		for i := range dst {
			dst[i] = F16ToF32(uint16(src[2*i]) | uint16(src[2*i+1])<<8)
		}
	case BF16:
		src := t.Data[2*first:]
		for i := range dst {
			dst[i] = BF16ToF32(uint16(src[2*i]) | uint16(src[2*i+1])<<8)
		}
	default:
		return fmt.Errorf("tensor %q has dtype %s, want F32, F16 or BF16: %w", t.Name, t.DType, ErrUnsupportedDType)
	}
	return nil
}

// Aliases reports whether Float32 returns t's bytes in place rather than a converted copy.
func Aliases(t Tensor) bool {
	return t.DType == F32 && len(t.Data) > 0 && littleEndian() &&
		uintptr(unsafe.Pointer(&t.Data[0]))%4 == 0
}

// littleEndian reports the byte order of this machine; safetensors data is little-endian.
func littleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// openSize opens path, a regular file, for mapFile implementations: a named pipe or device is
// refused before anything blocks on it.
func openSize(path string) (*os.File, int64, error) {
	return regular.Open(path)
}
