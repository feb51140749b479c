package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// rosetop replay's answers to what it is given: one line naming the input, exit 2 for what is
// not a recording; the summary (exit 0) for one, whole or cut short.
func TestReplayCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rec, err := os.ReadFile("testdata/recordings/cpu-tiny-v1.rec")
	if err != nil {
		t.Fatal(err)
	}
	cut := write("cut.rec", rec[:len(rec)/2])
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string // in the one line on stderr (code != 0) or in stdout
	}{
		{"missing file", []string{"replay", filepath.Join(dir, "missing.rec")}, 2, "missing.rec: no such file or directory"},
		{"empty file", []string{"replay", write("empty.rec", nil)}, 2, "empty.rec: empty file, not a rosetop recording"},
		{"not a recording", []string{"replay", write("notes.txt", []byte("some notes\n"))}, 2, "notes.txt: not a rosetop recording"},
		{"newer version", []string{"replay", write("newer.rec", []byte("rosetop recording\n\x07"))}, 2, "newer.rec: recorded by a newer rosetop: format version 7"},
		{"header cut off", []string{"replay", write("header.rec", []byte("rosetop recording\n\x01H\x40{"))}, 2, "header.rec: its header: at byte 19: cut off mid-frame"},
		{"no file", []string{"replay"}, 2, "rosetop replay takes one recording, got 0"},
		{"two files", []string{"replay", "a.rec", "b.rec"}, 2, "got 2"},
		{"a speed off the steps", []string{"replay", "--speed", "3", "testdata/recordings/cpu-tiny-v1.rec"}, 2, "--speed 3: want 0.25, 0.5, 1, 2, 4, 8 or 16"},
		{"a directory", []string{"replay", "--summary", dir}, 2, dir + ": not a regular file: it is a directory"},
		{"a device", []string{"replay", "--summary", os.DevNull}, 2, os.DevNull + ": not a regular file: it is a character device"},
		{"a FIFO with no writer (no hang)", []string{"replay", "--summary", fifo}, 2, fifo + ": not a regular file: it is a named pipe (FIFO)"},
		{"a FIFO as a trace (no hang)", []string{"bench", "--replay", fifo}, 2, "--replay " + fifo + ": not a regular file: it is a named pipe (FIFO)"},
		{"a FIFO as a dataset (no hang)", []string{"bench", "--dataset", "jsonl", "--dataset-path", fifo, "--output-len", "4"}, 2, fifo + ": not a regular file: it is a named pipe (FIFO)"},
		{"an unknown flag", []string{"replay", "--sumary", "x.rec"}, 2, "unknown flag --sumary (did you mean --summary?)"},
		{"summary", []string{"replay", "--summary", "testdata/recordings/cpu-tiny-v1.rec"}, 0, "engine 2: tiny-gpt2 (embedded)"},
		{"summary, the flag after the file", []string{"replay", "testdata/recordings/cpu-tiny-v1.rec", "--summary"}, 0, "=== rosetop recording: dashboard"},
		{"summary of a cut recording", []string{"replay", "--summary", cut}, 0, "cut off mid-frame; what comes before replays"},
		{"record from sweep", []string{"sweep", "--request-rates", "1,2", "--record", "x.rec"}, 2, "--record: rosetop sweep has no dashboard to record"},
		{"record where it cannot be written", []string{"bench", "--record", filepath.Join(dir, "no", "x.rec")}, 2, "--record " + filepath.Join(dir, "no", "x.rec")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tc.code, stderr)
			}
			if tc.code == 0 {
				if !strings.Contains(stdout, tc.want) {
					t.Fatalf("stdout lacks %q:\n%s", tc.want, stdout)
				}
				return
			}
			if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("stderr %q, want one line with %q", stderr, tc.want)
			}
		})
	}
}

// A run that fails before its first view records nothing: the file at --record keeps what it
// held, and nothing claims it was written.
func TestRecordKeptOnEarlyFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.rec")
	if err := os.WriteFile(path, []byte("an older recording"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "bench", "--model", filepath.Join(dir, "no-such-model")+"/", "--num-requests", "2", "--record", path)
	if code == 0 || strings.Contains(stderr, "wrote") || !strings.Contains(stderr, path+" left as it was") {
		t.Fatalf("exit %d, stderr %q; want a failure that says %s was left as it was", code, stderr, path)
	}
	if got, _ := os.ReadFile(path); string(got) != "an older recording" {
		t.Fatalf("%s now holds %q", path, got)
	}
}
