package hub

import (
	"io"
	"os"
	"path/filepath"
	"strings"
)

// maxTokenFile bounds the token file read: a token is a few dozen bytes.
const maxTokenFile = 4 << 10

// token is the hub token downloads send, found as huggingface_hub finds it: $HF_TOKEN, else
// $HUGGING_FACE_HUB_TOKEN (its older name), else the file `hf auth login` saves, at
// $HF_TOKEN_PATH or $HF_HOME/token (default ~/.cache/huggingface/token); "" for none. A file
// that cannot be read is no token, as in huggingface_hub.
func token(getenv func(string) string) string {
	for _, v := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"} {
		if t := strings.TrimSpace(getenv(v)); t != "" {
			return t
		}
	}
	home := getenv("HOME")
	path := getenv("HF_TOKEN_PATH")
	switch {
	case path != "":
		path = expandPath(path, home, getenv)
	case getenv("HF_HOME") != "":
		path = filepath.Join(expandPath(getenv("HF_HOME"), home, getenv), "token")
	case getenv("XDG_CACHE_HOME") != "":
		path = filepath.Join(expandPath(getenv("XDG_CACHE_HOME"), home, getenv), "huggingface", "token")
	case home != "":
		path = filepath.Join(home, ".cache", "huggingface", "token")
	default:
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
