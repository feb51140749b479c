package atomicfile

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// unnamedOrSkip skips a test where dir's file system makes no unnamed files.
func unnamedOrSkip(t *testing.T, dir string) {
	t.Helper()
	probe, err := createTemp(dir, "probe")
	if err != nil {
		t.Fatal(err)
	}
	named := probe.named
	probe.discard()
	if named != "" {
		t.Skip("no O_TMPFILE on this file system")
	}
}

// TestKilledWhileFilling: a process killed while it fills a Write leaves its directory as it was,
// with no temporary file (the second signal during an export exits at once).
func TestKilledWhileFilling(t *testing.T) {
	if dir := os.Getenv("ATOMICFILE_CHILD_DIR"); dir != "" {
		Write(filepath.Join(dir, "out.json"), func(w io.Writer) error {
			io.WriteString(w, "half of it")
			os.Stdout.WriteString("filling\n")
			select {} // killed here
		})
		return
	}
	dir := t.TempDir()
	unnamedOrSkip(t, dir)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWhileFilling$")
	cmd.Env = append(os.Environ(), "ATOMICFILE_CHILD_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "filling\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child said %q, %v", line, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Errorf("the killed writer left %d entries (%s), want none", len(es), es[0].Name())
	}
}

// TestCopyToNamed: where an unnamed file cannot be linked, its content moves into a named temp
// file, which a Pending then goes on writing through the *os.File its writer already holds.
func TestCopyToNamed(t *testing.T) {
	dir := t.TempDir()
	unnamedOrSkip(t, dir)
	tmp, err := createTemp(dir, "x.rec")
	if err != nil {
		t.Fatal(err)
	}
	held := tmp.File // as a recording's writer holds a Pending's file across Commit
	io.WriteString(held, "head")
	if err := tmp.copyToNamed(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "x.rec")
	if err := tmp.publish(path); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(held, "+more"); err != nil {
		t.Fatalf("writing on the file held across the copy: %v", err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	es, _ := os.ReadDir(dir)
	if string(got) != "head+more" || len(es) != 1 {
		t.Errorf("target holds %q, %d entries; want \"head+more\" alone", got, len(es))
	}
}
