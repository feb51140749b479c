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

// publish syncs the file, gives it the permissions of the regular file it replaces (a new one
// those of os.Create: 0644 less the umask), renames it over path and syncs the directory, so the
// new name survives a crash too. The file stays open, the same *os.File. On failure the target
// is as it was.
func (t *temp) publish(path string) error {
	if err := t.Sync(); err != nil {
		return err
	}
	if err := t.name(); err != nil {
		return err
	}
	mode := 0o644 &^ umask()
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		mode = fi.Mode().Perm()
	}
	if err := t.Chmod(mode); err != nil {
		return err
	}
	if err := os.Rename(t.named, path); err != nil {
		os.Remove(t.named)
		t.named = ""
		return err
	}
	t.named = path
	syncDir(t.dir)
	return nil
}

// syncDir flushes dir's entries to disk: a rename is durable only once its directory is. Best
// effort: the file is in place either way, and some file systems refuse to sync a directory.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
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
