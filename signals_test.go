package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/term"
)

// TestMain lets a test run this binary as rosetop itself (ROSETOP_TEST_MAIN=1) or as a process
// that ignores its cancelled context (=stuck), for the signal tests.
func TestMain(m *testing.M) {
	switch os.Getenv("ROSETOP_TEST_MAIN") {
	case "1":
		main()
		return
	case "stuck":
		sig := watchSignals(os.Stdin, os.Stdout, os.Stderr)
		fmt.Println("ready")
		<-sig.ctx.Done()
		fmt.Println("cancelled")
		select {} // a load that nothing can interrupt
	case "stuck-raw": // stuck with a dashboard's terminal: raw, on the alternate screen
		sig := watchSignals(os.Stdin, os.Stdout, os.Stderr)
		if _, err := term.MakeRaw(os.Stdin.Fd()); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		os.Stderr.WriteString(ansi.SetModeAltScreenSaveCursor + ansi.HideCursor)
		fmt.Println("ready")
		<-sig.ctx.Done()
		fmt.Println("cancelled")
		select {}
	case "stuck-quiet": // stuck while a model loads: the terminal's echo off, no dashboard yet
		sig := watchSignals(os.Stdin, os.Stdout, os.Stderr)
		quietInput(int(os.Stdin.Fd()))
		fmt.Println("ready")
		<-sig.ctx.Done()
		fmt.Println("cancelled")
		select {}
	}
	os.Unsetenv("VLLM_API_KEY") // the servers the tests start take no key unless a test gives one
	os.Exit(m.Run())
}

// child starts this test binary as rosetop with args; its stdout comes line by line.
func child(t *testing.T, mode string, args ...string) (*exec.Cmd, *bufio.Scanner, *strings.Builder) {
	t.Helper()
	cmd, out, stderr := childPipe(t, mode, args...)
	return cmd, bufio.NewScanner(out), stderr
}

// childPipe is child with its stdout as the pipe itself.
func childPipe(t *testing.T, mode string, args ...string) (*exec.Cmd, io.ReadCloser, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "ROSETOP_TEST_MAIN="+mode)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, out, &stderr
}

// childCmd is an unstarted command that runs this test binary as rosetop with args.
func childCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "ROSETOP_TEST_MAIN=1")
	return cmd
}

// waitLine reads sc until a line containing want; it fails when the output ends first.
func waitLine(t *testing.T, sc *bufio.Scanner, want string) {
	t.Helper()
	for sc.Scan() {
		if strings.Contains(sc.Text(), want) {
			return
		}
	}
	t.Fatalf("output ended before a line with %q", want)
}

// exitStatus waits for cmd and returns its exit status.
func exitStatus(t *testing.T, cmd *exec.Cmd, sc *bufio.Scanner) int {
	t.Helper()
	for sc.Scan() { // drain, so the child never blocks on a full pipe
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode()
}

// signalExit sends sig to cmd and checks that it then exits with code; what names the signal's
// moment for the failure. The deadline is a guard against a hang, not a timing check.
func signalExit(t *testing.T, cmd *exec.Cmd, sc *bufio.Scanner, sig os.Signal, code int, what string) {
	t.Helper()
	cmd.Process.Signal(sig)
	done := make(chan int, 1)
	go func() { done <- exitStatus(t, cmd, sc) }()
	select {
	case got := <-done:
		if got != code {
			t.Errorf("%s: exit %d, want %d", what, got, code)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not end the process", what)
	}
}

// TestSignalKeepsResults: SIGHUP or SIGTERM during `bench --json --csv` stops the run, writes
// both files with what was measured (the warmup run whole, the interrupted run marked partial)
// and exits 128+N.
func TestSignalKeepsResults(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGHUP, 129}, {syscall.SIGTERM, 143}, {syscall.SIGINT, 130}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			jsonPath, csvPath := filepath.Join(dir, "out.json"), filepath.Join(dir, "out.csv")
			cmd, sc, stderr := child(t, "1", "bench", "--device", "cpu", "--threads", "1", "--num-requests", "8",
				"--max-new-tokens", "100", "--no-stop-on-eos", "--warmup-runs", "1", "--repeat-runs", "1000",
				"--json", jsonPath, "--csv", csvPath)
			waitLine(t, sc, "=== run 1/1000 ===") // the warmup has finished
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			if code := exitStatus(t, cmd, sc); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			var rep struct {
				Runs []struct {
					Label   string
					Partial bool
				}
			}
			data, err := os.ReadFile(jsonPath)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &rep); err != nil {
				t.Fatal(err)
			}
			n := len(rep.Runs)
			if n < 2 || rep.Runs[0].Label != "warmup 1/1" || rep.Runs[0].Partial || !rep.Runs[n-1].Partial {
				t.Fatalf("json runs %+v, want the whole warmup first and the interrupted run last", rep.Runs)
			}
			for _, r := range rep.Runs[1 : n-1] {
				if r.Partial {
					t.Errorf("run %s before the signal is marked partial", r.Label)
				}
			}
			if csv, err := os.ReadFile(csvPath); err != nil || !strings.Contains(string(csv), "warmup 1/1") {
				t.Errorf("csv not written with the warmup's rows: %v", err)
			}
		})
	}
}

// TestSecondSignalExitsAtOnce: a process stuck in something its cancelled context cannot stop
// exits at the second signal with 128+N.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	cmd, sc, stderr := child(t, "stuck")
	waitLine(t, sc, "ready")
	cmd.Process.Signal(syscall.SIGTERM)
	waitLine(t, sc, "cancelled")
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan int, 1)
	go func() { done <- exitStatus(t, cmd, sc) }()
	select {
	case code := <-done:
		if code != 143 || !strings.Contains(stderr.String(), "again: exiting at once") {
			t.Errorf("exit %d, stderr %q; want 143 and the notice", code, stderr.String())
		}
	case <-time.After(30 * time.Second): // a guard against a hang, not a timing check
		t.Fatal("the second SIGTERM did not end the process")
	}
}

// TestSignalWhileBuildingPrompts: a signal while a large dataset's prompts are being built (after
// the model loaded, before the first run) ends the process with 128+N instead of after the build.
func TestSignalWhileBuildingPrompts(t *testing.T) {
	cmd := childCmd(t, "bench", "--device", "cpu", "--threads", "1", "--dataset", "random", "--input-len", "1000",
		"--output-len", "4", "--num-requests", "100000")
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(errPipe)
	waitLine(t, sc, "loaded") // the build starts now and takes minutes
	signalExit(t, cmd, sc, syscall.SIGTERM, 143, "SIGTERM during the build")
}

// TestClosedStdoutKeepsResults: `rosetop bench --json --csv | head -1`: a closed stdout is a
// write error (exit 1, said on stderr), not SIGPIPE's end of the process, and both files are
// written.
func TestClosedStdoutKeepsResults(t *testing.T) {
	dir := t.TempDir()
	js, csv := filepath.Join(dir, "p.json"), filepath.Join(dir, "p.csv")
	cmd, out, stderr := childPipe(t, "1", "bench", "--num-requests", "4", "--max-new-tokens", "8", "--warmup-runs", "1",
		"--repeat-runs", "2", "--json", js, "--csv", csv)
	out.Close() // before the child writes anything: its every write to stdout fails
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "broken pipe") {
		t.Errorf("exit %d (%v), stderr %q; want 1 and the write error", code, cmd.ProcessState, stderr.String())
	}
	for _, p := range []string{js, csv} {
		if b, err := os.ReadFile(p); err != nil || len(b) == 0 {
			t.Errorf("%s: %d bytes, %v", p, len(b), err)
		}
	}
}
