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

	"rosetop/engine/hub"
	"rosetop/engine/safetensors"
	"rosetop/engine/tokenizer"
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
// Errors are one line naming the spec or file; they wrap ErrModelNotFound or ErrInvalidModel (and
// the hub's or the safetensors reader's sentinel where one of them failed).
func LoadModel(ctx context.Context, spec string, opts LoadOptions) (*Model, error) {
	if spec == "" {
		return LoadTiny()
	}
	if name, ok := strings.CutPrefix(spec, "random:"); ok {
		return NewRandomModel(name, opts.Seed)
	}
	if fi, err := os.Stat(spec); err == nil {
		if !fi.IsDir() {
			return nil, fmt.Errorf("model %s: %w: not a directory (want one holding config.json and model.safetensors)", spec, ErrInvalidModel)
		}
		return LoadDir(spec, spec)
	}
	if looksLikePath(spec) {
		return nil, fmt.Errorf("model directory %s does not exist: %w", spec, ErrModelNotFound)
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
	return LoadDir(dir, spec)
}

// looksLikePath tells a mistyped directory from a hub id: hub ids have at most one '/' and never
// start with '.', '/' or '~'.
func looksLikePath(s string) bool {
	return strings.HasPrefix(s, ".") || strings.HasPrefix(s, "/") || strings.HasPrefix(s, "~") ||
		strings.Count(s, "/") > 1 || strings.HasSuffix(s, "/") ||
		strings.ContainsRune(s, '\\') || filepath.IsAbs(s)
}

// LoadDir loads a Hugging Face GPT-2 directory; name becomes Model.Name. F32 weights stay in the
// memory map (Model.Close unmaps it); F16 and BF16 weights are converted and the file is closed.
func LoadDir(dir, name string) (*Model, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("model directory %s does not exist: %w", dir, ErrModelNotFound)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("model %s: %w: not a directory", dir, ErrInvalidModel)
	}
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "model.safetensors")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		hint := ""
		if _, err := os.Stat(filepath.Join(dir, "pytorch_model.bin")); err == nil {
			hint = " (it has pytorch_model.bin; rosetop reads safetensors only: re-save with save_pretrained(dir, safe_serialization=True))"
		}
		return nil, fmt.Errorf("model %s: %w: no model.safetensors%s", dir, ErrInvalidModel, hint)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, tagged{err, ErrInvalidModel}
	}
	w, aliased, err := loadWeights(f, cfg)
	if err == nil && !aliased {
		err = f.Close() // everything was converted: the map is not needed
	}
	var tok *tokenizer.Tokenizer
	if err == nil {
		tok, err = tokenizer.FromDir(dir)
		if err != nil {
			err = tagged{err, ErrInvalidModel}
		}
	}
	if err == nil {
		err = checkVocab(cfg, tok, dir)
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
