package safetensors

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzParseIndex: any index bytes give a one-line error naming the file, or a weight map whose
// shards are plain .safetensors file names, which Shards lists once each, sorted.
//
// The committed corpus is in testdata/fuzz/FuzzParseIndex.
func FuzzParseIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":496},"weight_map":{"wte.weight":"model-00001-of-00002.safetensors","h.0.ln_1.bias":"model-00002-of-00002.safetensors","wpe.weight":"model-00001-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../x.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"sub/x.safetensors","b":"x.bin"}}`))
	f.Add([]byte(`{"weight_map":{}}`))
	f.Add([]byte(`{"weight_map":{"a":1}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, err := ParseIndex("model.safetensors.index.json", b)
		if err != nil {
			if msg := err.Error(); !errors.Is(err, ErrInvalid) || strings.Contains(msg, "\n") || !strings.Contains(msg, "model.safetensors.index.json") {
				t.Fatalf("error %q: want one line wrapping ErrInvalid and naming the file", msg)
			}
			return
		}
		shards := idx.Shards()
		if len(shards) == 0 || !slices.IsSorted(shards) || len(slices.Compact(slices.Clone(shards))) != len(shards) {
			t.Fatalf("Shards() = %q: want distinct names, sorted", shards)
		}
		for _, s := range shards {
			if filepath.Base(s) != s || strings.ContainsAny(s, `/\`) || !strings.HasSuffix(s, ".safetensors") || s == ".." {
				t.Fatalf("shard %q accepted: not a plain .safetensors name", s)
			}
		}
	})
}

// An index is UTF-8 JSON, as transformers reads it: other bytes are refused, not read as U+FFFD,
// which would name a shard file that is not the one the index spells.
func TestParseIndexNotUTF8(t *testing.T) {
	_, err := ParseIndex("model.safetensors.index.json", []byte("{\"weight_map\":{\"a\":\"m\xff.safetensors\"}}"))
	if msg := fmt.Sprint(err); !errors.Is(err, ErrInvalid) || !strings.Contains(msg, "model.safetensors.index.json") || !strings.Contains(msg, "UTF-8") {
		t.Fatalf("ParseIndex = %v; want ErrInvalid naming the file and saying it is not UTF-8", err)
	}
}
