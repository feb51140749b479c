package safetensors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"rosetop/internal/regular"
)

// IndexFile names the index of a sharded checkpoint in Hugging Face layout (transformers'
// SAFE_WEIGHTS_INDEX_NAME): {"metadata": {...}, "weight_map": {tensor: shard file}}, the shards
// lying beside it.
const IndexFile = "model.safetensors.index.json"

// maxIndexBytes bounds an index file: one line per tensor, a few hundred kilobytes for the largest
// models.
const maxIndexBytes = 64 << 20

// Index is a sharded checkpoint's index.
type Index struct {
	WeightMap map[string]string // tensor name -> shard file name (a plain name, never a path)
}

// ReadIndex reads and checks the index file at path, a regular file of at most 64 MiB.
func ReadIndex(path string) (Index, error) {
	b, err := regular.ReadFile(path, maxIndexBytes)
	if err != nil {
		return Index{}, fmt.Errorf("safetensors index %s: %w: %w", path, ErrInvalid, err)
	}
	return ParseIndex(path, b)
}

// ParseIndex parses index bytes; name labels errors. Each shard must be a file name ending in
// .safetensors: an index never points outside its directory.
func ParseIndex(name string, b []byte) (Index, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("safetensors index %s: %w: %s", name, ErrInvalid, fmt.Sprintf(format, args...))
	}
	var j struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return Index{}, bad("not a JSON object")
	}
	// Go's JSON reader would read bad bytes as U+FFFD, naming a shard the index does not spell.
	if !utf8.Valid(b) {
		return Index{}, bad("not UTF-8 text")
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return Index{}, bad("invalid JSON: %v", err)
	}
	if len(j.WeightMap) == 0 {
		return Index{}, bad("weight_map is missing or empty (want tensor name -> shard file)")
	}
	for tensor, shard := range j.WeightMap {
		if shard != filepath.Base(shard) || strings.ContainsAny(shard, `/\`) || !strings.HasSuffix(shard, ".safetensors") || shard == ".safetensors" {
			return Index{}, bad("weight_map[%q] is %q, want a file name ending in .safetensors in the index's directory", tensor, shard)
		}
	}
	return Index{WeightMap: j.WeightMap}, nil
}

// Shards returns the distinct shard file names, sorted.
func (x Index) Shards() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range x.WeightMap {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
