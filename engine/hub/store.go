package hub

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"rosetop/internal/atomicfile"
)

// save writes body into part (or a new temporary file when part is "") from offset off, checks
// the final size against total (-1: unknown) and the file's limit, validates the contents and
// moves the file to its blob name. A cut or stalled transfer leaves part in place for the next
// attempt; a wrong size or invalid contents remove it, so it is never resumed.
func (d *downloader) save(body io.Reader, part string, off, total int64, f repoFile, meta respMeta) (result, bool, error) {
	fail := func(sentinel error, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s: %s", sentinel, d.name(), f.name, fmt.Sprintf(format, args...))
	}
	blobs := filepath.Join(d.repo, "blobs")
	var fh *os.File
	var err error
	if part == "" {
		fh, err = os.CreateTemp(blobs, "download-*.incomplete")
	} else {
		fh, err = os.OpenFile(part, os.O_CREATE|os.O_WRONLY, 0o644)
	}
	if err != nil {
		return result{}, false, fail(ErrDownload, "%v", err)
	}
	name := fh.Name()
	if err := fh.Truncate(off); err != nil {
		fh.Close()
		return result{}, false, fail(ErrDownload, "%v", err)
	}
	if _, err := fh.Seek(off, io.SeekStart); err != nil {
		fh.Close()
		return result{}, false, fail(ErrDownload, "%v", err)
	}
	src := body
	switch {
	case total >= 0:
		src = io.LimitReader(body, total-off+1) // one byte more than announced reveals a liar
	case f.maxBytes > 0:
		src = io.LimitReader(body, f.maxBytes-off+1)
	}
	prog := newProgress(d.o.Progress, d.o.Now, d.id+" "+f.name, off, total)
	n, copyErr := io.Copy(fh, io.TeeReader(src, prog))
	prog.finish()
	size := off + n
	if copyErr == nil {
		copyErr = fh.Sync()
	}
	if err := fh.Close(); copyErr == nil {
		copyErr = err
	}
	switch {
	case total >= 0 && size > total:
		os.Remove(name)
		return result{}, false, fail(ErrSizeMismatch, "received more than the %d bytes the server announced", total)
	case f.maxBytes > 0 && size > f.maxBytes:
		os.Remove(name)
		return result{}, false, fail(ErrBadFile, "more than the %d-byte limit for this file; %s", f.maxBytes, d.notCached())
	case copyErr != nil && part == "":
		os.Remove(name)
		return result{}, false, fmt.Errorf("%w: %s: %s: interrupted after %d bytes: %w; %s", ErrDownload, d.name(), f.name, size, flat(copyErr), again(part, size))
	case copyErr != nil:
		return result{}, true, fmt.Errorf("%w: %s: %s: interrupted after %d of %s bytes: %w; %s", ErrDownload, d.name(), f.name, size, sizeText(total), flat(copyErr), again(part, size))
	case total >= 0 && size != total:
		os.Remove(name)
		return result{}, false, fail(ErrSizeMismatch, "got %d bytes, the server announced %d", size, total)
	}
	if err := validate(f.name, name); err != nil {
		os.Remove(name) // never resumed: the bytes are not the file
		return result{}, false, fail(ErrBadFile, "%s; %s", oneLine(err), d.notCached())
	}
	blob := filepath.Join(blobs, blobName(meta, f.name))
	if err := os.Rename(name, blob); err != nil {
		os.Remove(name)
		return result{}, false, fail(ErrDownload, "%v", err)
	}
	return result{commit: meta.commit, blob: blob}, false, nil
}

// flat keeps a stall error as it is (one line, matching ErrStalled) and flattens any other
// transport error onto one line.
func flat(err error) error {
	if errors.Is(err, ErrStalled) {
		return err
	}
	return errors.New(oneLine(err))
}

// sizeText prints a size that may be unknown (-1).
func sizeText(n int64) string {
	if n < 0 {
		return "unknown"
	}
	return fmt.Sprint(n)
}

// blobName names a complete file under blobs/: by its hash (the ETag, as Hugging Face does) when
// the server sent one, else by commit and file name.
func blobName(meta respMeta, file string) string {
	etag := strings.TrimPrefix(meta.etag, "W/")
	etag = strings.Trim(etag, `"`)
	if plainName(etag) {
		return etag
	}
	commit := meta.commit
	if !plainName(commit) {
		commit = "main"
	}
	return commit + "." + file
}

// plainName reports whether a name the server sent (a hash, a commit) can name a file or
// directory of the cache as it is: 1 to 128 letters, digits, '-', '_' and '.', not starting with
// '.', so never a path out of the cache.
func plainName(s string) bool {
	if s == "" || s[0] == '.' || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// place links snapshots/<commit>/name to the blob with a relative symlink, as Hugging Face does,
// and falls back to moving the blob there where symlinks are not allowed. The link appears under
// its final name atomically (rename), so a reader never sees a half-made entry.
func place(blob, snap, name string) error {
	if err := os.MkdirAll(snap, 0o755); err != nil {
		return err
	}
	final := filepath.Join(snap, name)
	// A name of this process's own: another placing the same file meanwhile must not take it.
	fh, err := os.CreateTemp(snap, "."+name+".*.link")
	if err != nil {
		return err
	}
	tmp := fh.Name()
	fh.Close()
	os.Remove(tmp)
	if rel, err := filepath.Rel(snap, blob); err == nil {
		if err := os.Symlink(rel, tmp); err == nil {
			return os.Rename(tmp, final)
		}
	}
	return os.Rename(blob, final)
}

// writeAtomic replaces path with data (atomicfile: synced before the rename, so a crash leaves
// the old file or the new one, never an empty one), making its directory first.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
