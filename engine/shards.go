package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"rosetop/engine/safetensors"
)

// tensorFiles is where loadWeights reads a checkpoint's tensors: one safetensors file, or the
// shards of a sharded checkpoint. *safetensors.File is one.
type tensorFiles interface {
	Name() string    // the file, or the index of the shards: what errors name
	Names() []string // every tensor, sorted
	Tensor(name string) (safetensors.Tensor, bool)
	Float32(name string) ([]float32, error)
	Close() error
}

// openWeights opens dir's weights as transformers looks for them: model.safetensors, else the
// shards that model.safetensors.index.json lists. Errors wrap ErrInvalidModel. A link to nothing
// is an error naming it, not a missing file: the weights it stood for are not there.
func openWeights(dir string) (tensorFiles, error) {
	path := filepath.Join(dir, "model.safetensors")
	index := filepath.Join(dir, safetensors.IndexFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := danglingLink("weights", path, ErrInvalidModel); err != nil {
			return nil, err
		}
		if _, err := os.Stat(index); err == nil {
			return openShards(index)
		} else if errors.Is(err, fs.ErrNotExist) {
			if err := danglingLink("safetensors index", index, ErrInvalidModel); err != nil {
				return nil, err
			}
		}
		hint := ""
		if _, err := os.Stat(filepath.Join(dir, "pytorch_model.bin")); err == nil {
			hint = " (it has pytorch_model.bin; rosetop reads safetensors only: re-save with save_pretrained(dir, safe_serialization=True))"
		}
		return nil, fmt.Errorf("model %s: %w: no model.safetensors or %s%s", dir, ErrInvalidModel, safetensors.IndexFile, hint)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, tagged{err, ErrInvalidModel}
	}
	return f, nil
}

// shards is an opened sharded checkpoint: each tensor is found in the one shard that holds it.
// Read-only after openShards.
type shards struct {
	index string                       // the index file's path
	files []*safetensors.File          // the open shards
	where map[string]*safetensors.File // tensor name -> the shard holding it
}

// openShards opens every shard the index at path lists and checks that each tensor is in one
// shard only, the one the index names.
func openShards(path string) (_ *shards, err error) {
	idx, err := safetensors.ReadIndex(path)
	if err != nil {
		return nil, tagged{err, ErrInvalidModel}
	}
	s := &shards{index: path, where: map[string]*safetensors.File{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	for _, name := range idx.Shards() {
		file := filepath.Join(filepath.Dir(path), name)
		f, err := safetensors.Open(file)
		if errors.Is(err, fs.ErrNotExist) {
			if lerr := danglingLink("safetensors shard", file, ErrInvalidModel); lerr != nil {
				return nil, lerr
			}
		}
		if err != nil {
			return nil, tagged{fmt.Errorf("%w (a shard listed in %s)", err, filepath.Base(path)), ErrInvalidModel}
		}
		s.files = append(s.files, f)
		for _, t := range f.Names() {
			if other, ok := s.where[t]; ok {
				return nil, fmt.Errorf("safetensors index %s: %w: tensor %q is in two shards, %s and %s", path, ErrInvalidModel, t, filepath.Base(other.Name()), name)
			}
			s.where[t] = f
		}
	}
	for _, t := range sortedKeys(idx.WeightMap) {
		if f, ok := s.where[t]; !ok || filepath.Base(f.Name()) != idx.WeightMap[t] {
			return nil, fmt.Errorf("safetensors index %s: %w: tensor %q is listed in %s, which does not hold it", path, ErrInvalidModel, t, idx.WeightMap[t])
		}
	}
	return s, nil
}

func (s *shards) Name() string { return s.index }

func (s *shards) Names() []string { return sortedKeys(s.where) }

func (s *shards) Tensor(name string) (safetensors.Tensor, bool) {
	if f, ok := s.where[name]; ok {
		return f.Tensor(name)
	}
	return safetensors.Tensor{}, false
}

func (s *shards) Float32(name string) ([]float32, error) {
	if f, ok := s.where[name]; ok {
		return f.Float32(name)
	}
	return nil, fmt.Errorf("safetensors index %s: tensor %q: %w", s.index, name, safetensors.ErrNoTensor)
}

// Close unmaps every shard.
func (s *shards) Close() error {
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
