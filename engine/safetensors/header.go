package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"unicode/utf8"
)

// maxHeaderLen caps the JSON header (the reference implementation uses the same 100 MB bound);
// a GPT-2 header is a few kilobytes.
const maxHeaderLen = 100 << 20

// headerEntry is one tensor's description in the JSON header.
type headerEntry struct {
	DType       string
	Shape       []int64
	DataOffsets []uint64
}

// parse validates the whole header of b and builds the tensor table; tensor data alias b.
func parse(name string, b []byte) (*File, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("safetensors %s: %w: %s", name, ErrInvalid, fmt.Sprintf(format, args...))
	}
	if len(b) < 8 {
		return nil, bad("file is %d bytes, shorter than the 8-byte header length", len(b))
	}
	// Bound the length by the file size before touching (or allocating for) the header.
	n := binary.LittleEndian.Uint64(b[:8])
	if n > uint64(len(b)-8) {
		return nil, bad("header length %d exceeds the %d bytes after the length field (truncated file?)", n, len(b)-8)
	}
	if n > maxHeaderLen {
		return nil, bad("header length %d exceeds the %d-byte limit", n, maxHeaderLen)
	}
	hdr := b[8 : 8+n]
	data := b[8+n:]
	// Go's JSON reader would turn invalid bytes into U+FFFD, so two distinct names could become one.
	if !utf8.Valid(hdr) {
		return nil, bad("header is not valid UTF-8")
	}
	if trimmed := bytes.TrimLeft(hdr, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, bad("header is not a JSON object")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, bad("header JSON: %v", err)
	}
	if err := uniqueNames(hdr); err != nil {
		return nil, bad("header: %v", err)
	}
	f := &File{name: name, tensors: make(map[string]Tensor, len(raw))}
	if m, ok := raw["__metadata__"]; ok {
		if err := json.Unmarshal(m, &f.metadata); err != nil {
			return nil, bad("__metadata__ is not an object of strings: %v", err)
		}
		delete(raw, "__metadata__")
	}
	// Sorted, so that a file with several problems always reports the same one.
	names := make([]string, 0, len(raw))
	for tn := range raw {
		names = append(names, tn)
	}
	sort.Strings(names)
	spans := make([]span, 0, len(raw))
	for _, tn := range names {
		t, begin, err := parseEntry(tn, raw[tn], data)
		if err != nil {
			return nil, fmt.Errorf("safetensors %s: %w", name, err)
		}
		f.tensors[tn] = t
		if len(t.Data) > 0 {
			spans = append(spans, span{tn, begin, begin + uint64(len(t.Data))})
		}
	}
	if err := checkOverlap(spans); err != nil {
		return nil, fmt.Errorf("safetensors %s: %w", name, err)
	}
	return f, nil
}

// parseEntry checks one tensor's dtype, shape and byte range against the data section.
// It returns the tensor and the offset of its first byte.
func parseEntry(tn string, msg json.RawMessage, data []byte) (Tensor, uint64, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: tensor %q: %s", ErrInvalid, tn, fmt.Sprintf(format, args...))
	}
	e, err := decodeEntry(msg)
	if err != nil {
		return Tensor{}, 0, bad("%v", err)
	}
	if e.DType == "" {
		return Tensor{}, 0, bad("no dtype")
	}
	dt := DType(e.DType)
	size := dt.Size()
	if size == 0 {
		return Tensor{}, 0, fmt.Errorf("%w: tensor %q has dtype %q, not a safetensors dtype of whole bytes", ErrUnsupportedDType, tn, e.DType)
	}
	if e.Shape == nil {
		return Tensor{}, 0, bad("no shape")
	}
	if len(e.DataOffsets) != 2 {
		return Tensor{}, 0, bad("data_offsets has %d entries, want 2", len(e.DataOffsets))
	}
	begin, end := e.DataOffsets[0], e.DataOffsets[1]
	if begin > end {
		return Tensor{}, 0, bad("data_offsets [%d, %d] begin after end", begin, end)
	}
	if end > uint64(len(data)) {
		return Tensor{}, 0, bad("data_offsets [%d, %d] beyond the %d-byte data section", begin, end, len(data))
	}
	// The product of the nonzero dimensions must fit in an int, so that Numel cannot overflow;
	// a zero dimension makes the tensor empty whatever the others are.
	shape := make([]int, len(e.Shape))
	prod, empty := uint64(1), false
	for i, d := range e.Shape {
		if d < 0 {
			return Tensor{}, 0, bad("shape %v has a negative dimension", e.Shape)
		}
		shape[i] = int(d)
		if d == 0 {
			empty = true
			continue
		}
		if prod > math.MaxInt/uint64(d) {
			return Tensor{}, 0, bad("shape %v overflows", e.Shape)
		}
		prod *= uint64(d)
	}
	nbytes := uint64(0)
	if !empty {
		if prod > uint64(len(data))/uint64(size) {
			return Tensor{}, 0, bad("shape %v needs more bytes than the %d-byte data section", e.Shape, len(data))
		}
		nbytes = prod * uint64(size)
	}
	if end-begin != nbytes {
		return Tensor{}, 0, bad("data_offsets [%d, %d] hold %d bytes, shape %v of %s needs %d", begin, end, end-begin, e.Shape, dt, nbytes)
	}
	return Tensor{Name: tn, DType: dt, Shape: shape, Data: data[begin:end:end]}, begin, nil
}

// decodeEntry reads a tensor's description. Its fields are matched by exact name (encoding/json
// would also take "DType" for dtype, where the reference reader ignores it) and each at most once.
func decodeEntry(msg json.RawMessage) (headerEntry, error) {
	var e headerEntry
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(msg, &fields); err != nil {
		return e, err
	}
	if err := uniqueNames(msg); err != nil {
		return e, err
	}
	for _, f := range []struct {
		name string
		dst  any
	}{{"dtype", &e.DType}, {"shape", &e.Shape}, {"data_offsets", &e.DataOffsets}} {
		if v, ok := fields[f.name]; ok {
			if err := json.Unmarshal(v, f.dst); err != nil {
				return e, fmt.Errorf("%s: %v", f.name, err)
			}
		}
	}
	return e, nil
}

// uniqueNames refuses a JSON object (already known to be valid) that gives a member name twice:
// encoding/json keeps the last silently, where another reader may keep the first.
func uniqueNames(obj []byte) error {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil { // '{'
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		if seen[name] {
			return fmt.Errorf("%q appears twice", name)
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil && !errors.Is(err, io.EOF) { // '}'
		return err
	}
	return nil
}

// span is a tensor's byte range in the data section.
type span struct {
	name       string
	begin, end uint64
}

// checkOverlap rejects tensors whose byte ranges overlap: each tensor owns its bytes.
func checkOverlap(spans []span) error {
	sort.Slice(spans, func(i, j int) bool { return spans[i].begin < spans[j].begin })
	for i := 1; i < len(spans); i++ {
		if spans[i].begin < spans[i-1].end {
			return fmt.Errorf("%w: tensors %q and %q overlap", ErrInvalid, spans[i-1].name, spans[i].name)
		}
	}
	return nil
}
