// Package atomicfile writes files so that a reader sees the old content or the whole new one,
// never a part: the data goes to a temporary file beside the target (on Linux an unnamed one, so
// a process killed while writing leaves nothing behind), is synced, and is renamed over it. A
// failed write (a full disk, an error from the producer) leaves the old file as it was.
// A symlink is followed (the file it names is replaced, the link stays; one that leads nowhere
// is refused), and a target that exists and is not a regular file (/dev/stdout, /dev/null, a
// FIFO, a terminal) is written in place as a stream: renaming over it would replace the device
// node or the pipe with a file.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Write creates or replaces path with what fill writes. A new file gets mode 0644 (less the
// umask); a replaced one keeps its permissions.
func Write(path string, fill func(w io.Writer) error) error {
	path, err := resolve(path)
	if err != nil {
		return err
	}
	if f, ok, err := openStream(path); ok {
		if err != nil {
			return err
		}
		if err := fill(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	tmp, err := createTemp(split(path))
	if err != nil {
		return err
	}
	if err := fill(tmp); err != nil {
		tmp.discard()
		return err
	}
	if err := tmp.publish(path); err != nil {
		tmp.discard()
		return err
	}
	return tmp.Close()
}

// split is path's directory ("." for a bare name) and base name.
func split(path string) (dir, base string) {
	dir, base = filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	return dir, base
}

// Pending is a file being made to replace path: written beside it, and swapped in by Commit,
// after which it stays open and writes go on into it (a recording, appended to as it is made).
// Until Commit, path holds what it held, and a Pending closed before it is removed. A target
// that is a stream (see Write) is written in place from the start: Commit does nothing.
type Pending struct {
	*os.File
	path      string // the target, its symlinks followed
	tmp       *temp  // the file until Commit; nil for a stream
	committed bool
}

// Begin starts a Pending for path.
func Begin(path string) (*Pending, error) {
	path, err := resolve(path)
	if err != nil {
		return nil, err
	}
	if f, ok, err := openStream(path); ok {
		if err != nil {
			return nil, err
		}
		return &Pending{File: f, path: path}, nil
	}
	tmp, err := createTemp(split(path))
	if err != nil {
		return nil, err
	}
	return &Pending{File: tmp.File, path: path, tmp: tmp}, nil
}

// Commit syncs what was written and renames the file over path; the file stays open.
func (p *Pending) Commit() error {
	if p.tmp == nil || p.committed {
		return nil
	}
	if err := p.tmp.publish(p.path); err != nil {
		return err
	}
	p.committed = true
	return nil
}

// Close closes the file and, before Commit, removes it: path keeps what it held.
func (p *Pending) Close() error {
	if p.tmp == nil || p.committed {
		return p.File.Close()
	}
	return p.tmp.discard()
}

// Check reports, before any work is done, whether Write(path, ...) can succeed: the directory
// exists and takes a new file, and path is not a directory.
func Check(path string) error {
	if path == "" {
		return errors.New("empty path")
	}
	path, err := resolve(path)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	} else if err == nil && !fi.Mode().IsRegular() {
		return nil // a stream, opened when written (a FIFO's reader may start later)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".check-*")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if fi, serr := os.Stat(dir); serr == nil && fi.IsDir() { // a file system that makes no files (/proc)
			return fmt.Errorf("directory %s takes no new files", dir)
		}
		return fmt.Errorf("directory %s does not exist", dir)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("directory %s is not writable", dir)
	case err != nil:
		return err
	}
	name := tmp.Name()
	tmp.Close()
	return os.Remove(name)
}

// resolve follows path's symlinks to the file they name; a path that is no symlink stays as it
// is. A link that leads nowhere (its target not there yet, a loop) is refused rather than
// written: creating its target would follow a link that another user may have put in a shared
// directory (/tmp), and replacing the link with a file would lose it.
func resolve(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return path, nil
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		dest, _ := os.Readlink(path)
		return "", fmt.Errorf("%s is a symlink to %s, which does not exist: give the file's own path", path, dest)
	}
	return real, nil
}

// openStream opens path for writing in place when it exists and is neither a regular file nor a
// directory; ok says it is such a file. A FIFO is opened without blocking, so one that nobody
// reads is an error rather than a hang.
func openStream(path string) (f *os.File, ok bool, err error) {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().IsRegular() || fi.IsDir() {
		return nil, false, nil
	}
	flag := os.O_WRONLY
	if fi.Mode()&fs.ModeNamedPipe != 0 {
		flag |= syscall.O_NONBLOCK
	}
	f, err = os.OpenFile(path, flag, 0)
	if errors.Is(err, syscall.ENXIO) {
		err = fmt.Errorf("%s: a FIFO that no process reads", path)
	}
	return f, true, err
}

// umask is the process's file mode creation mask, read from /proc (Linux) so that nothing
// changes it; 022 where it cannot be read.
func umask() os.FileMode {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0o022
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
				return os.FileMode(m)
			}
		}
	}
	return 0o022
}
