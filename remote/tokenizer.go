package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"rosetop/engine/hub"
	"rosetop/engine/tokenizer"
)

// LoadTokenizer loads the tokenizer that counts a server's tokens where the server does not:
// "" is GPT-2's (embedded); an existing directory is read in Hugging Face's layout
// (tokenizer.json, else vocab.json with merges.txt); anything else is a Hugging Face id whose
// tokenizer files (not its weights) come from the hub cache or are downloaded into it. Only
// GPT-2's byte-level BPE format is read: another is an error naming its file and what it has.
// Errors are *TokenizerError.
func LoadTokenizer(ctx context.Context, spec string, progress io.Writer) (*tokenizer.Tokenizer, error) {
	if spec == "" {
		return tokenizer.GPT2()
	}
	fail := func(err error, named bool) error { return &TokenizerError{Spec: spec, Err: err, named: named} }
	formatOnly := func(err error) error { return fmt.Errorf("%w (rosetop reads GPT-2's byte-level BPE format only)", err) }
	dir := spec
	if fi, err := os.Stat(spec); err != nil {
		if !hub.ValidID(spec) {
			return nil, fail(errors.New("no such directory, and not a Hugging Face id (NAME or ORG/NAME)"), false)
		}
		if dir, err = hub.ResolveTokenizer(ctx, spec, hub.Options{Progress: progress}); err != nil {
			return nil, fail(formatOnly(err), true)
		}
	} else if !fi.IsDir() {
		return nil, fail(errors.New("not a directory"), false)
	}
	if !isFile(filepath.Join(dir, "tokenizer.json")) && !isFile(filepath.Join(dir, "vocab.json")) {
		what := "holds no tokenizer.json or vocab.json"
		if dir != spec {
			what = dir + " " + what
		}
		return nil, fail(formatOnly(errors.New(what)), false)
	}
	tok, err := tokenizer.FromDir(dir)
	if err != nil {
		return nil, fail(formatOnly(err), false)
	}
	return tok, nil
}

// TokenizerError is why LoadTokenizer could not load Spec. It wraps ErrConfig and Err, whose
// sentinels (tokenizer.ErrInvalid, the hub's) it keeps; its message names the tokenizer once.
type TokenizerError struct {
	Spec string // as given: a directory or a Hugging Face id
	Err  error  // why
	// named: Err's message names Spec itself, as the hub's errors do ("tokenizer gpt9 is not in
	// the Hugging Face cache ...").
	named bool
}

// Error is "tokenizer SPEC: why", or the hub's message, which names the tokenizer.
func (e *TokenizerError) Error() string {
	if e.named {
		return e.Err.Error()
	}
	return e.Named("tokenizer")
}

// Named is the message with the tokenizer called name, e.g. the flag that gave it: "--tokenizer
// /tmp: holds no tokenizer.json or vocab.json (...)"; before the hub's message, which names the
// id itself, name stands alone: "--tokenizer: tokenizer gpt9 is not in the Hugging Face cache".
func (e *TokenizerError) Named(name string) string {
	if e.named {
		return name + ": " + e.Err.Error()
	}
	return name + " " + e.Spec + ": " + e.Err.Error()
}

// Unwrap returns ErrConfig and the cause.
func (e *TokenizerError) Unwrap() []error { return []error{ErrConfig, e.Err} }

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
