package atomicfile

import (
	"os"
)

// temp is the file a Write or a Pending fills before it replaces its target. Where the system
// makes unnamed files (Linux's O_TMPFILE) it has no name until publish, so a process killed while
// filling it (a second signal during an export) leaves nothing behind; elsewhere it is a hidden
// file beside the target from the start.
type temp struct {
	*os.File
	dir, base string
	named     string // its name in dir; "" while unnamed
}

// createNamed makes a temp that is a hidden file in dir from the start.
func createNamed(dir, base string) (*temp, error) {
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, err
	}
	return &temp{File: f, dir: dir, base: base, named: f.Name()}, nil
}

// publish syncs the file, gives it the mode of a new file and renames it over path. The file
// stays open, the same *os.File. On failure the target is as it was.
func (t *temp) publish(path string) error {
	if err := t.Sync(); err != nil {
		return err
	}
	if err := t.Chmod(0o644 &^ umask()); err != nil {
		return err
	}
	if err := t.name(); err != nil {
		return err
	}
	if err := os.Rename(t.named, path); err != nil {
		os.Remove(t.named)
		t.named = ""
		return err
	}
	t.named = path
	return nil
}

// discard closes the file and removes it where it has a name that is not yet the target's.
func (t *temp) discard() error {
	err := t.Close()
	if t.named != "" {
		if rerr := os.Remove(t.named); err == nil {
			err = rerr
		}
	}
	return err
}
