package remote

import (
	"context"
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
// Errors wrap ErrConfig and the cause (tokenizer.ErrInvalid, a hub sentinel).
func LoadTokenizer(ctx context.Context, spec string, progress io.Writer) (*tokenizer.Tokenizer, error) {
	if spec == "" {
		return tokenizer.GPT2()
	}
	fail := func(err error) error {
		return fmt.Errorf("%w: tokenizer %s: %w (rosetop reads GPT-2's byte-level BPE format only)", ErrConfig, spec, err)
	}
	dir := spec
	if fi, err := os.Stat(spec); err != nil {
		if !hub.ValidID(spec) {
			return nil, fail(fmt.Errorf("no such directory, and not a Hugging Face id (NAME or ORG/NAME)"))
		}
		if dir, err = hub.ResolveTokenizer(ctx, spec, hub.Options{Progress: progress}); err != nil {
			return nil, fail(err)
		}
	} else if !fi.IsDir() {
		return nil, fail(fmt.Errorf("not a directory"))
	}
	if !isFile(filepath.Join(dir, "tokenizer.json")) && !isFile(filepath.Join(dir, "vocab.json")) {
		return nil, fail(fmt.Errorf("%s holds no tokenizer.json or vocab.json", dir))
	}
	tok, err := tokenizer.FromDir(dir)
	if err != nil {
		return nil, fail(err)
	}
	return tok, nil
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
