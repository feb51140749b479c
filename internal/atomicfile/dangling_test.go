package atomicfile

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDanglingSymlinkRefused: a link whose target does not exist (yet, or anywhere: a loop) is
// refused by Check, Write and Begin, which leave the link as it was and create nothing where it
// points (a link in a shared directory may be another user's).
func TestDanglingSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target.json")
	dangling, loop := filepath.Join(dir, "dangling.json"), filepath.Join(dir, "loop.json")
	if err := os.Symlink(target, dangling); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop.json", loop); err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{dangling, loop} {
		if err := Check(link); err == nil || !strings.Contains(err.Error(), "is a symlink to") {
			t.Errorf("Check(%s) = %v, want the link named as leading nowhere", link, err)
		}
		if err := Write(link, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err == nil {
			t.Errorf("Write through %s succeeded", link)
		}
		if p, err := Begin(link); err == nil {
			p.Close()
			t.Errorf("Begin through %s succeeded", link)
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a link: %v", link, err)
		}
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("the dangling link's target was created: %v", err)
	}
}
