package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestCommandHelpOnStdout: a command's -h or --help, asked for, prints its usage on stdout and
// exits 0, as rosetop -h and rosetop help CMD do; a stdout that does not take it is a failure
// (exit 1, said on stderr). A flag error's one line stays on stderr with exit 2, and a -h that
// is a flag's value asks for no help.
func TestCommandHelpOnStdout(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "-h"}, "usage: rosetop [bench] [flags]"},
		{[]string{"bench", "--num-requests", "2", "--help"}, "usage: rosetop [bench] [flags]"},
		{[]string{"dashboard", "-help"}, "usage: rosetop [bench] [flags]"},
		{[]string{"--device", "cpu", "-h"}, "usage: rosetop [bench] [flags]"},
		{[]string{"serve", "-h"}, "usage: rosetop serve [flags]"},
		{[]string{"sweep", "--help"}, "usage: rosetop sweep "},
		{[]string{"generate", "-h"}, "Usage: rosetop generate [flags]"},
		{[]string{"replay", "-h"}, "usage: rosetop replay [flags] FILE"},
		{[]string{"replay", "x.rec", "--help"}, "usage: rosetop replay [flags] FILE"},
		{[]string{"help", "sweep"}, "usage: rosetop sweep "},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		if code != 0 || !strings.HasPrefix(stdout, tc.want) || stderr != "" {
			t.Errorf("%q: exit %d, stdout %.60q, stderr %q; want exit 0 and %q on stdout alone", tc.args, code, stdout, stderr, tc.want)
		}
		var errOut bytes.Buffer
		code = run(context.Background(), tc.args, strings.NewReader(""), fullWriter{}, &errOut)
		if code != exitFail || errOut.String() != "rosetop: stdout: no space left on device\n" {
			t.Errorf("%q to a full stdout: exit %d, stderr %q; want 1 and the write error", tc.args, code, errOut.String())
		}
	}
	for _, args := range [][]string{{"bench", "--bogus"}, {"serve", "--port", "x"}, {"generate", "--max-new-tokens", "0"}, {"replay", "--speed", "3", "x"}} {
		code, stdout, stderr := runCLI(t, args...)
		if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %.60q, stderr %q; want exit 2 and one line on stderr", args, code, stdout, stderr)
		}
	}
	code, stdout, stderr := runCLI(t, "generate", "--device", "cpu", "--prompt", "-h", "--max-new-tokens", "2")
	if code != 0 || strings.Contains(stdout, "Usage") || strings.Contains(stderr, "Usage") {
		t.Errorf("--prompt -h: exit %d, stdout %.60q, stderr %.60q; want the prompt's continuation", code, stdout, stderr)
	}
}
