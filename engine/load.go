package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"rosetop/engine/hub"
	"rosetop/engine/tokenizer"
	"rosetop/internal/regular"
)

// LoadOptions configure LoadModel.
type LoadOptions struct {
	Progress   io.Writer           // download progress bar; nil: silent
	Getenv     func(string) string // environment (HF_HOME, HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE...); nil: os.Getenv
	HTTPClient *http.Client        // nil: a default client with connect and header timeouts
	Seed       uint64              // seed of random:NAME weights
}

// LoadModel loads the model named by spec:
//   - "": the embedded tiny model;
//   - "random:NAME": architecture NAME (gpt2, gpt2-medium, ...) with seeded random weights;
//   - an existing directory: config.json + model.safetensors (+ tokenizer files) in Hugging Face layout;
//   - otherwise a Hugging Face model id (gpt2, openai-community/gpt2), from the local hub cache or
//     downloaded into it.
//
// Errors are one line naming the spec or file; they wrap ErrModelNotFound, ErrInvalidModel or
// ErrModelTooLarge (and the hub's or the safetensors reader's sentinel where one of them failed).
// Loading stops between chunks of weights once ctx is done, with an error wrapping ctx's.
func LoadModel(ctx context.Context, spec string, opts LoadOptions) (*Model, error) {
	if spec == "" {
		return LoadTiny()
	}
	if name, ok := strings.CutPrefix(spec, "random:"); ok {
		return NewRandomModel(ctx, name, opts.Seed)
	}
	err := checkDir(spec)
	if err == nil {
		return LoadDir(ctx, spec, spec)
	}
	if _, lerr := os.Lstat(spec); lerr == nil || !errors.Is(err, ErrModelNotFound) || looksLikePath(spec) {
		return nil, err // something is there (a dangling link too), or spec is a path: not a hub id
	}
	if !hub.ValidID(spec) {
		return nil, fmt.Errorf("model %q: %w: no such directory, and not a Hugging Face id (want a directory, NAME or ORG/NAME, or random:NAME)", spec, ErrModelNotFound)
	}
	dir, err := hub.Resolve(ctx, spec, hub.Options{Getenv: opts.Getenv, HTTPClient: opts.HTTPClient, Progress: opts.Progress})
	if err != nil {
		if errors.Is(err, hub.ErrNotFound) || errors.Is(err, hub.ErrNotCached) {
			return nil, tagged{err, ErrModelNotFound}
		}
		return nil, err
	}
	return LoadDir(ctx, dir, spec)
}

// checkDir returns nil when path is a directory, else an error saying what is there: nothing or a
// link to nothing (ErrModelNotFound), a symbolic link loop, a file, a pipe (ErrInvalidModel).
func checkDir(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("model %s: %w: %s, not a directory (want one holding config.json and model.safetensors)", path, ErrInvalidModel, regular.Kind(fi.Mode()))
	case errors.Is(err, fs.ErrNotExist):
		if err := danglingLink("model directory", path, ErrModelNotFound); err != nil {
			return err
		}
		return fmt.Errorf("model directory %s does not exist: %w", path, ErrModelNotFound)
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("model %s: %w: a symbolic link loop (too many levels of symbolic links)", path, ErrInvalidModel)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("model %s: %w: %v", path, ErrInvalidModel, err)
}

// danglingLink says "WHAT PATH is a symbolic link to TARGET, which does not exist", wrapping kind,
// for a path that Stat found missing but that is a link; nil when it is no link. Such a link (a
// snapshot copied without its blobs/) is a broken file, not an absent one.
func danglingLink(what, path string, kind error) error {
	target, ok := regular.DanglingLink(path)
	if !ok {
		return nil
	}
	return fmt.Errorf("%s %s is a symbolic link to %s, which does not exist: %w", what, path, target, kind)
}

// looksLikePath tells a mistyped directory from a hub id: hub ids have at most one '/' and never
// start with '.', '/' or '~'.
func looksLikePath(s string) bool {
	return strings.HasPrefix(s, ".") || strings.HasPrefix(s, "/") || strings.HasPrefix(s, "~") ||
		strings.Count(s, "/") > 1 || strings.HasSuffix(s, "/") ||
		strings.ContainsRune(s, '\\') || filepath.IsAbs(s)
}

// LoadDir loads a Hugging Face GPT-2 directory, its weights in model.safetensors or in the shards
// model.safetensors.index.json lists; name becomes Model.Name. F32 weights stay in the memory map
// (Model.Close unmaps it); F16 and BF16 weights are converted and the files are closed. Every
// weight is checked finite. A done ctx stops the load between chunks of weights.
func LoadDir(ctx context.Context, dir, name string) (*Model, error) {
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	f, err := openWeights(dir)
	if err != nil {
		return nil, err
	}
	w, tok, aliased, err := loadDirWeights(ctx, dir, f, cfg)
	if err == nil && !aliased {
		err = f.Close() // everything was converted: the map is not needed
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	m := &Model{Name: name, Dir: dir, Config: cfg, Weights: w, Tokenizer: tok}
	if aliased {
		m.close = f.Close
	}
	return m, nil
}

// loadDirWeights loads dir's tokenizer, then the weights from f.
func loadDirWeights(ctx context.Context, dir string, f tensorFiles, cfg Config) (*Weights, *tokenizer.Tokenizer, bool, error) {
	// The tokenizer first: it is quick to load and to find broken, the weights are not.
	tok, err := tokenizer.FromDir(dir)
	if err != nil {
		return nil, nil, false, tagged{err, ErrInvalidModel}
	}
	if err := checkVocab(cfg, tok, dir); err != nil {
		return nil, nil, false, err
	}
	w, aliased, err := loadWeights(ctx, f, cfg, machineMemory())
	return w, tok, aliased, err
}

// checkVocab makes sure every token id the tokenizer can produce has an embedding row.
func checkVocab(cfg Config, tok *tokenizer.Tokenizer, where string) error {
	if n := tok.VocabSize(); n > cfg.VocabSize {
		return fmt.Errorf("model %s: %w: the tokenizer has %d tokens but config.json vocab_size is %d", where, ErrInvalidModel, n, cfg.VocabSize)
	}
	return nil
}

// tagged is err that also matches tag with errors.Is, without repeating tag's text.
type tagged struct{ err, tag error }

func (t tagged) Error() string   { return t.err.Error() }
func (t tagged) Unwrap() []error { return []error{t.err, t.tag} }
