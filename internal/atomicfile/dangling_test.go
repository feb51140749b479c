package atomicfile

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteThroughDanglingSymlink: a link whose target does not exist yet gets that target
// created, by Write and by a Pending's Commit alike, and stays a link: by an absolute name, a
// relative one, through a chain of links, and relative to a linked directory (".." in the link
// leaves the directory the kernel finds, not the name's parent).
func TestWriteThroughDanglingSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(real, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(real, "sub"), filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, link string
		chain      []string // each link's content, from the link the writer names to the last
		target     string
	}{
		{"absolute", "abs.json", []string{filepath.Join(real, "abs-target.json")}, filepath.Join(real, "abs-target.json")},
		{"relative", "rel.json", []string{"real/rel-target.json"}, filepath.Join(real, "rel-target.json")},
		{"chain", "chain.json", []string{"chain2.json", "real/chain-target.json"}, filepath.Join(real, "chain-target.json")},
		{"dot-dot in a linked directory", "alias/up.json", []string{"../up-target.json"}, filepath.Join(real, "up-target.json")},
	} {
		for _, pending := range []bool{false, true} {
			links := []string{filepath.Join(dir, tc.link)}
			for i, dest := range tc.chain {
				if i > 0 {
					links = append(links, filepath.Join(filepath.Dir(links[i-1]), tc.chain[i-1]))
				}
				os.Remove(links[i])
				if err := os.Symlink(dest, links[i]); err != nil {
					t.Fatal(err)
				}
			}
			os.Remove(tc.target)
			if err := Check(links[0]); err != nil {
				t.Fatalf("%s: Check: %v", tc.name, err)
			}
			if pending {
				p, err := Begin(links[0])
				if err != nil {
					t.Fatal(err)
				}
				io.WriteString(p, "new")
				if err := p.Commit(); err != nil {
					t.Fatal(err)
				}
				p.Close()
			} else if err := Write(links[0], func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
				t.Fatalf("%s: Write: %v", tc.name, err)
			}
			for _, l := range links {
				if fi, err := os.Lstat(l); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("%s (pending %v): %s is no longer a link: %v", tc.name, pending, l, err)
				}
			}
			if got, err := os.ReadFile(tc.target); err != nil || string(got) != "new" {
				t.Errorf("%s (pending %v): the target holds %q, %v; want it created with the new content", tc.name, pending, got, err)
			}
		}
	}
}

// TestDanglingSymlinkNowhere: a link into a directory that does not exist, or a loop of links, is
// refused by Check, and a Write there fails without replacing the link with a file.
func TestDanglingSymlinkNowhere(t *testing.T) {
	dir := t.TempDir()
	missing, loop := filepath.Join(dir, "missing.json"), filepath.Join(dir, "loop.json")
	if err := os.Symlink(filepath.Join(dir, "no", "such", "x.json"), missing); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop.json", loop); err != nil {
		t.Fatal(err)
	}
	if err := Check(missing); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Check(a link into a missing directory) = %v, want the directory named missing", err)
	}
	if err := Write(missing, func(w io.Writer) error { return nil }); err == nil {
		t.Errorf("Write through a link into a missing directory succeeded")
	}
	if fi, err := os.Lstat(missing); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link into a missing directory was replaced: %v", err)
	}
	if err := Check(loop); err == nil {
		t.Errorf("Check(a loop of links) = nil, want an error")
	}
}
