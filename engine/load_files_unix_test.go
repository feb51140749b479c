//go:build unix

package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestLoadSpecialFiles: a model file that is a named pipe, a device or a directory, and model
// paths that are symbolic link loops or dangling links, each get one line saying what the path
// is. A named pipe must never be opened for a blocking read: that would hang the load for good.
func TestLoadSpecialFiles(t *testing.T) {
	cfg := loadTestCfg()
	model := func(t *testing.T) string {
		return loadWriteModel(t, loadTestConfigJSON(cfg), loadTestTensors(cfg, ""))
	}
	// replace swaps dir/name for what make creates at that path.
	replace := func(name string, make func(path string) error) func(t *testing.T) string {
		return func(t *testing.T) string {
			d := model(t)
			p := filepath.Join(d, name)
			os.Remove(p)
			if err := make(p); err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	fifo := func(p string) error { return syscall.Mkfifo(p, 0o644) }
	mkdir := func(p string) error { return os.Mkdir(p, 0o755) }
	link := func(target string) func(p string) error {
		return func(p string) error { return os.Symlink(target, p) }
	}
	loop := func(p string) error { return os.Symlink(filepath.Base(p), p) }
	cases := []struct {
		name  string
		setup func(t *testing.T) string // returns the spec
		file  string                    // the file the message names, under the spec ("": the spec)
		is    error
		want  string
	}{
		{"config.json a named pipe", replace("config.json", fifo), "config.json", ErrInvalidModel, "not a regular file: it is a named pipe (FIFO)"},
		{"config.json a directory", replace("config.json", mkdir), "config.json", ErrInvalidModel, "it is a directory"},
		{"config.json a symlink loop", replace("config.json", loop), "config.json", ErrInvalidModel, "too many levels of symbolic links"},
		{"config.json links to a device", replace("config.json", link(os.DevNull)), "config.json", ErrInvalidModel, "it is a character device"},
		{"model.safetensors a named pipe", replace("model.safetensors", fifo), "model.safetensors", ErrInvalidModel, "not a regular file: it is a named pipe (FIFO)"},
		{"model.safetensors a directory", replace("model.safetensors", mkdir), "model.safetensors", ErrInvalidModel, "it is a directory"},
		{"model.safetensors links to /dev/zero", replace("model.safetensors", link("/dev/zero")), "model.safetensors", ErrInvalidModel, "it is a character device"},
		{"tokenizer.json a named pipe", replace("tokenizer.json", fifo), "tokenizer.json", ErrInvalidModel, "it is a named pipe (FIFO)"},
		{"vocab.json a named pipe", replace("vocab.json", fifo), "vocab.json", ErrInvalidModel, "it is a named pipe (FIFO)"},
		{"merges.txt a named pipe", func(t *testing.T) string {
			d := model(t)
			os.WriteFile(filepath.Join(d, "vocab.json"), []byte(`{"a": 0}`), 0o644) // merges.txt is read next
			if err := syscall.Mkfifo(filepath.Join(d, "merges.txt"), 0o644); err != nil {
				t.Fatal(err)
			}
			return d
		}, "merges.txt", ErrInvalidModel, "it is a named pipe (FIFO)"},
		{"model directory a symlink loop", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "m")
			loop(p)
			return p
		}, "", ErrInvalidModel, "a symbolic link loop"},
		{"model directory a dangling symlink", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "m")
			os.Symlink("gone", p)
			return p
		}, "", ErrModelNotFound, "is a symbolic link to gone, which does not exist"},
		{"hub-id-like dangling symlink", func(t *testing.T) string {
			t.Chdir(t.TempDir())
			os.Symlink("gone", "gpt2")
			return "gpt2"
		}, "", ErrModelNotFound, "gpt2 is a symbolic link to gone, which does not exist"},
		{"hub-id-like symlink loop", func(t *testing.T) string {
			t.Chdir(t.TempDir())
			os.Symlink("gpt2", "gpt2")
			return "gpt2"
		}, "", ErrInvalidModel, "gpt2: invalid model: a symbolic link loop"},
		{"model directory a named pipe", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "m")
			fifo(p)
			return p
		}, "", ErrInvalidModel, "a named pipe (FIFO), not a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := c.setup(t)
			m, err := LoadModel(context.Background(), spec, LoadOptions{Getenv: func(string) string { return "" }})
			if err == nil {
				m.Close()
				t.Fatal("LoadModel succeeded")
			}
			name := spec
			if c.file != "" {
				name = filepath.Join(spec, c.file)
			}
			msg := err.Error()
			if !errors.Is(err, c.is) || !strings.Contains(msg, name) || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line wrapping %v, naming %s, saying %q", msg, c.is, name, c.want)
			}
			if strings.Contains(msg, "does not exist") && c.is != ErrModelNotFound {
				t.Errorf("error %q says the path does not exist", msg)
			}
		})
	}
}
