package regular

import (
	"errors"
	"io/fs"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// TestReadFile covers every kind of path a user can name as a model file. A named pipe without a
// writer is the case that matters most: a blocking open would never return.
func TestReadFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("named pipes and unix sockets are unix-only")
	}
	dir := t.TempDir()
	write := func(name string, n int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Repeat("x", n)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	loop := filepath.Join(dir, "loop")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	const limit = 10
	cases := []struct {
		name string
		path string
		want int   // bytes read on success
		is   error // else the error it wraps
		says string
	}{
		{"regular file", write("ok", 7), 7, nil, ""},
		{"empty file", write("empty", 0), 0, nil, ""},
		{"exactly the limit", write("ten", limit), limit, nil, ""},
		{"over the limit", write("eleven", limit+1), 0, ErrTooLarge, "11 bytes, over the 10-byte limit"},
		{"named pipe", fifo, 0, ErrNotRegular, "a named pipe (FIFO)"},
		{"directory", dir, 0, ErrNotRegular, "a directory"},
		{"socket", sock, 0, ErrNotRegular, "a socket"},
		{"character device", os.DevNull, 0, ErrNotRegular, "a character device"},
		{"missing", filepath.Join(dir, "nope"), 0, fs.ErrNotExist, "no such file"},
		{"symlink loop", loop, 0, syscall.ELOOP, "a symbolic link loop: too many levels of symbolic links"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := ReadFile(c.path, limit)
			if c.is == nil {
				if err != nil || len(b) != c.want {
					t.Fatalf("ReadFile = %d bytes, %v; want %d bytes", len(b), err, c.want)
				}
				return
			}
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("ReadFile error = %v; want one wrapping %v that says %q", err, c.is, c.says)
			}
			if strings.Contains(err.Error(), c.path) {
				t.Errorf("error %q names the path; callers do", err)
			}
		})
	}
}

func TestKind(t *testing.T) {
	for m, want := range map[fs.FileMode]string{
		0:                                 "a regular file",
		fs.ModeDir:                        "a directory",
		fs.ModeSymlink:                    "a symbolic link",
		fs.ModeNamedPipe:                  "a named pipe (FIFO)",
		fs.ModeSocket:                     "a socket",
		fs.ModeDevice | fs.ModeCharDevice: "a character device",
		fs.ModeDevice:                     "a block device",
		fs.ModeIrregular:                  "not a regular file (mode ?---------)",
	} {
		if got := Kind(m); got != want {
			t.Errorf("Kind(%v) = %q, want %q", m, got, want)
		}
	}
}

// TestDanglingLink: only a link whose target is missing is dangling; a file, a good link and a
// missing path are not.
func TestDanglingLink(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "blob")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	if err := os.Symlink("blob", good); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	if err := os.Symlink("../blobs/gone", bad); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{file: "", good: "", bad: "../blobs/gone", filepath.Join(dir, "none"): ""} {
		if target, ok := DanglingLink(path); target != want || ok != (want != "") {
			t.Errorf("DanglingLink(%s) = %q, %v; want %q", filepath.Base(path), target, ok, want)
		}
	}
}

// The largest limit means no limit: limit+1 must not wrap to a negative read budget.
func TestReadFileNoLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("seven b"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := ReadFile(p, math.MaxInt64)
	if err != nil || string(b) != "seven b" {
		t.Fatalf("ReadFile(MaxInt64) = %q, %v; want %q", b, err, "seven b")
	}
}
