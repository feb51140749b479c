// Package atomicfile writes files so that a reader sees the old content or the whole new one,
// never a part: the data goes to a temporary file beside the target, is synced, and is renamed
// over it. A failed write (a full disk, an error from the producer) leaves the old file as it was.
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
)

// Write creates or replaces path with what fill writes. The file gets mode 0644 (less the umask).
func Write(path string, fill func(w io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := fill(tmp); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644 &^ umask()); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Replace creates or replaces path with a file holding head and returns it open for writing at
// its end: a file that grows after it is created (a recording, appended to as it is made) is
// swapped in whole with its first bytes, so path never holds a part of them.
func Replace(path string, head []byte) (f *os.File, err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(head); err != nil {
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		return nil, err
	}
	if err := tmp.Chmod(0o644 &^ umask()); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, err
	}
	return tmp, nil
}

// Check reports, before any work is done, whether Write(path, ...) can succeed: the directory
// exists and takes a new file, and path is not a directory.
func Check(path string) error {
	if path == "" {
		return errors.New("empty path")
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".check-*")
	switch {
	case errors.Is(err, fs.ErrNotExist):
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
