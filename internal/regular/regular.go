// Package regular opens and reads files that must be regular files: model files, datasets,
// traces and recordings named by a user, which may turn out to be a named pipe that blocks
// forever, a device that never ends or a directory. It refuses anything else before reading a
// byte, and caps what ReadFile reads.
//
// Errors carry no path (the caller names the file in its own prefix); they wrap ErrNotRegular,
// ErrTooLarge or the underlying fs error (fs.ErrNotExist and the like).
package regular

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"syscall"
)

// Sentinel errors.
var (
	// ErrNotRegular: the path names a directory, named pipe, socket, device or other non-file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: ReadFile's file is larger than the caller's limit.
	ErrTooLarge = errors.New("file too large")
)

// Open opens path read-only and returns it with its size, refusing anything but a regular file.
// Opening never blocks: a named pipe without a writer is refused, not waited on.
func Open(path string) (*os.File, int64, error) {
	f, err := openNoBlock(path)
	if err != nil {
		// Some kinds cannot be opened at all (a socket: ENXIO); say what the path is instead.
		if fi, serr := os.Stat(path); serr == nil && !fi.Mode().IsRegular() {
			return nil, 0, Check(fi)
		}
		if errors.Is(err, syscall.ELOOP) {
			return nil, 0, fmt.Errorf("a symbolic link loop: %w", unwrapPath(err))
		}
		return nil, 0, unwrapPath(err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, unwrapPath(err)
	}
	if err := Check(fi); err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// ReadFile reads the whole of path, a regular file of at most limit bytes.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, size, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > limit {
		return nil, fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrTooLarge, size, limit)
	}
	// The size may change under us: read at most limit+1 bytes to tell (limit itself when that
	// would overflow).
	b, err := io.ReadAll(io.LimitReader(f, limit+min(1, math.MaxInt64-limit)))
	if err != nil {
		return nil, unwrapPath(err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: more than the %d-byte limit", ErrTooLarge, limit)
	}
	return b, nil
}

// Check refuses a FileInfo (from Stat, which follows links) that is not a regular file, saying
// what it is.
func Check(fi fs.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%w: it is %s", ErrNotRegular, Kind(fi.Mode()))
}

// Kind names a file mode's type for a message: "a directory", "a named pipe (FIFO)", ...
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "not a regular file (mode " + m.String() + ")"
}

// unwrapPath drops an fs.PathError's path and operation: callers name the file themselves.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// DanglingLink reports whether path is a symbolic link to nothing (a snapshot copied without the
// blobs its files link to), and the link's target: a broken file, not an absent one.
func DanglingLink(path string) (target string, ok bool) {
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	target, err := os.Readlink(path)
	return target, err == nil
}
