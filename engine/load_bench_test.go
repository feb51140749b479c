package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkLoadDir loads a GPT-2-124M-shaped directory (zero weights) in F32 (used in place,
// scanned) and F16 (converted and checked chunk by chunk): what the finite check costs at load.
func BenchmarkLoadDir(b *testing.B) {
	for _, dtype := range []string{"F32", "F16"} {
		b.Run(dtype, func(b *testing.B) {
			dir, size := benchModelDir(b, dtype)
			b.SetBytes(size)
			for b.Loop() {
				m, err := LoadModel(context.Background(), dir, LoadOptions{})
				if err != nil {
					b.Fatal(err)
				}
				m.Close()
			}
		})
	}
}

// benchModelDir writes gpt2's shapes with zero weights of dtype and returns the directory and the
// weights file's size.
func benchModelDir(b *testing.B, dtype string) (string, int64) {
	cfg, _ := ArchConfig("gpt2")
	elem := map[string]int{"F32": 4, "F16": 2}[dtype]
	hdr := map[string]any{}
	off := 0
	for _, s := range weightSpecs(cfg, &Weights{Layers: make([]LayerWeights, cfg.NLayer)}) {
		n := elem
		for _, d := range s.shape {
			n *= d
		}
		hdr[s.name] = map[string]any{"dtype": dtype, "shape": s.shape, "data_offsets": []int{off, off + n}}
		off += n
	}
	js, _ := json.Marshal(hdr)
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	dir := b.TempDir()
	st := append(binary.LittleEndian.AppendUint64(nil, uint64(len(js))), js...)
	st = append(st, make([]byte, off)...)
	cj := fmt.Sprintf(`{"model_type":"gpt2","n_layer":%d}`, cfg.NLayer)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cj), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), st, 0o644); err != nil {
		b.Fatal(err)
	}
	return dir, int64(len(st))
}
