package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// A Pending leaves the target as it was until Commit, is removed when closed before it, and
// after it is the target, taking further writes.
func TestPending(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.rec")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	entries := func() int {
		es, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	p, err := Begin(path)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(p, "never committed")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" || entries() != 1 {
		t.Fatalf("closed before Commit: the target holds %q, %d entries; want \"old\" alone", got, entries())
	}
	p, err = Begin(path)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	io.WriteString(p, "head")
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Fatalf("before Commit the target holds %q, want \"old\"", got)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(p, "+more")
	if got, _ := os.ReadFile(path); string(got) != "head+more" || entries() != 1 {
		t.Fatalf("after Commit the target holds %q, %d entries; want \"head+more\" alone", got, entries())
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("after Commit: %v, %v; want the replaced file's mode, 0600", fi, err)
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

// TestReplaceKeepsPermissions: a file the user made private (0600) stays private when Write or a
// Pending's Commit replaces it.
func TestReplaceKeepsPermissions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil { // whatever the umask
		t.Fatal(err)
	}
	perm := func() os.FileMode {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	if err := Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	if got := perm(); got != 0o600 {
		t.Errorf("after Write: mode %v, want 0600 kept", got)
	}
	p, err := Begin(path)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := perm(); got != 0o600 {
		t.Errorf("after Commit: mode %v, want 0600 kept", got)
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

// Begin refuses a path whose directory does not exist.
func TestBeginMissingDirectory(t *testing.T) {
	if p, err := Begin(filepath.Join(t.TempDir(), "missing", "x.rec")); err == nil {
		p.Close()
		t.Fatal("Begin into a missing directory succeeded")
	}
}

// TestWriteThroughSymlink: a symlink's target is replaced and the link stays a link.
func TestWriteThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	target, link := filepath.Join(dir, "real.json"), filepath.Join(dir, "link.json")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.json", link); err != nil {
		t.Fatal(err)
	}
	if err := Check(link); err != nil {
		t.Fatal(err)
	}
	if err := Write(link, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v, %v", fi.Mode(), err)
	}
	if got, _ := os.ReadFile(target); string(got) != "new" {
		t.Errorf("target = %q, want the new content", got)
	}
}

// TestWriteToFIFO: a FIFO is written in place as a stream (it stays a FIFO and its reader gets
// the data); one that no process reads is an error, not a hang. Write and Begin alike.
func TestWriteToFIFO(t *testing.T) {
	for _, replace := range []bool{false, true} {
		fifo := filepath.Join(t.TempDir(), "out.fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Skip("no FIFOs here:", err)
		}
		if err := Check(fifo); err != nil {
			t.Fatalf("Check: %v", err)
		}
		write := func() error {
			if !replace {
				return Write(fifo, func(w io.Writer) error { _, err := io.WriteString(w, "streamed"); return err })
			}
			p, err := Begin(fifo)
			if err != nil {
				return err
			}
			if _, err := io.WriteString(p, "stream"); err != nil {
				p.Close()
				return err
			}
			if err := p.Commit(); err != nil {
				p.Close()
				return err
			}
			if _, err := io.WriteString(p, "ed"); err != nil {
				p.Close()
				return err
			}
			return p.Close()
		}
		if err := write(); err == nil || !strings.Contains(err.Error(), "no process reads") {
			t.Errorf("replace %v: no reader: err = %v, want a FIFO that no process reads", replace, err)
		}
		// The reader; and a writer of the test's own, held open so that the reader meets the
		// end of the stream only after write's data, not before write opens the FIFO.
		r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		hold, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(r)
			got <- string(b)
		}()
		err = write()
		hold.Close()
		if err != nil {
			t.Fatalf("replace %v: %v", replace, err)
		}
		if s := <-got; s != "streamed" {
			t.Errorf("replace %v: the reader got %q", replace, s)
		}
		r.Close()
		if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			t.Errorf("replace %v: the FIFO was replaced: %v, %v", replace, fi.Mode(), err)
		}
	}
}

// A directory that exists but makes no files (procfs answers ENOENT) is not called missing.
func TestCheckProcfs(t *testing.T) {
	if fi, err := os.Stat("/proc/self"); err != nil || !fi.IsDir() {
		t.Skip("no procfs here")
	}
	// root meets procfs's ENOENT, another user its permissions first
	if err := Check("/proc/rosetop-check.json"); err == nil || strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Check in /proc = %v, want a directory that takes no new files or is not writable", err)
	}
}
