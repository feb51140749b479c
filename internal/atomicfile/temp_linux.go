package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// createTemp makes an unnamed file in dir (O_TMPFILE), or a named one where dir's file system
// makes no unnamed files.
func createTemp(dir, base string) (*temp, error) {
	fd, err := unix.Open(dir, unix.O_RDWR|unix.O_TMPFILE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return createNamed(dir, base)
	}
	return &temp{File: os.NewFile(uintptr(fd), filepath.Join(dir, "."+base+".tmp")), dir: dir, base: base}, nil
}

// name links an unnamed file into its directory under a hidden name, through /proc/self/fd.
// Where that link cannot be made (no /proc), the content is copied into a named temp file, which
// takes the unnamed one's place.
func (t *temp) name() error {
	if t.named != "" {
		return nil
	}
	proc := "/proc/self/fd/" + strconv.Itoa(int(t.Fd()))
	for i := range 16 {
		name := filepath.Join(t.dir, fmt.Sprintf(".%s.tmp-%d-%d", t.base, time.Now().UnixNano(), i))
		err := unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, name, unix.AT_SYMLINK_FOLLOW)
		if err == nil {
			t.named = name
			return nil
		}
		if !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	return t.copyToNamed()
}

// copyToNamed moves an unnamed temp's content into a new named one, which then takes the
// unnamed one's descriptor (dup3): t.File, which a Pending's writer may hold, writes on into it.
func (t *temp) copyToNamed() error {
	named, err := createNamed(t.dir, t.base)
	if err != nil {
		return err
	}
	end, err := t.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = io.Copy(named, io.NewSectionReader(t.File, 0, end))
	}
	if err == nil {
		err = named.Sync()
	}
	if err == nil {
		err = unix.Dup3(int(named.Fd()), int(t.Fd()), unix.O_CLOEXEC)
	}
	if err != nil {
		named.discard()
		return err
	}
	named.Close() // t's descriptor is the named file now, at its end
	t.named = named.named
	return nil
}
