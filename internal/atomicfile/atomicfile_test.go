package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteKeepsOldOnFailure: a producer that fails half way leaves the previous file whole and
// no temporary file behind.
func TestWriteKeepsOldOnFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.json")
	if err := Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "old"); return err }); err != nil {
		t.Fatal(err)
	}
	full := errors.New("no space left on device")
	err := Write(path, func(w io.Writer) error {
		io.WriteString(w, "new but cut")
		return full
	})
	if !errors.Is(err, full) {
		t.Fatalf("err = %v, want the producer's error", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("file = %q after a failed write, want the old content", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the target", len(entries))
	}
}

func TestWriteReplacesAndMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.csv")
	for _, content := range []string{"one", "two"} {
		if err := Write(path, func(w io.Writer) error { _, err := io.WriteString(w, content); return err }); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); string(got) != content {
			t.Errorf("file = %q, want %q", got, content)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := 0o644 &^ umask(); fi.Mode().Perm() != want {
		t.Errorf("mode %v, want %v (0644 less the umask, as os.Create gives)", fi.Mode().Perm(), want)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, path, want string
	}{
		{"missing directory", filepath.Join(dir, "no", "such", "f.json"), "directory " + filepath.Join(dir, "no", "such") + " does not exist"},
		{"a directory", dir, "is a directory"},
		{"empty", "", "empty path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check(%q) = %v, want %q", tc.path, err, tc.want)
			}
		})
	}
	if err := Check(filepath.Join(dir, "ok.json")); err != nil {
		t.Errorf("Check(a new file in a writable directory) = %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("Check left %d entries behind", len(entries))
	}
}

// Replace swaps in a whole new file holding head, readable at once, and appends go after head.
func TestReplace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.rec")
	if err := os.WriteFile(path, []byte("an older, longer file"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Replace(path, []byte("head\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "head\n" {
		t.Fatalf("after Replace the file holds %q, want the head alone", got)
	}
	if _, err := f.Write([]byte("frame\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "head\nframe\n" {
		t.Fatalf("after a write the file holds %q", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("the directory holds %d entries, want the file alone (no temporary left)", len(entries))
	}
	if _, err := Replace(filepath.Join(t.TempDir(), "missing", "x.rec"), nil); err == nil {
		t.Fatal("Replace into a missing directory succeeded")
	}
}
