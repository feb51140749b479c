package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/term"
	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: the master end the test reads, the slave end the child runs on.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skip("no pseudo-terminals here:", err)
	}
	var n int
	rc, err := m.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) {
			if err = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); err == nil {
				n, err = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
			}
		})
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		m.Close()
		t.Skip("no pseudo-terminals here:", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skip("no pseudo-terminals here:", err)
	}
	return m, s
}

// ptyChild is this test binary run as rosetop on a pseudo-terminal: stdin and stderr are the
// terminal, stdout comes line by line (out); everything written on the terminal is kept.
type ptyChild struct {
	cmd    *exec.Cmd
	slave  *os.File
	before *term.State // the terminal's mode before the child started
	out    *bufio.Scanner
	mu     sync.Mutex
	cond   *sync.Cond   // on mu: the screen grew or the reads ended
	screen bytes.Buffer // guarded by mu
	ended  bool         // guarded by mu: the master's reads ended
}

// startOnPTY starts the child with env added to its environment (ROSETOP_TEST_MAIN=mode picks
// another main) and args.
func startOnPTY(t *testing.T, env []string, args ...string) *ptyChild {
	t.Helper()
	master, slave := openPTY(t)
	t.Cleanup(func() { master.Close(); slave.Close() })
	p := &ptyChild{slave: slave}
	p.cond = sync.NewCond(&p.mu)
	var err error
	if p.before, err = term.GetState(slave.Fd()); err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			p.mu.Lock()
			p.screen.Write(buf[:n])
			p.ended = err != nil
			p.cond.Broadcast()
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	p.cmd = childCmd(t, args...)
	p.cmd.Env = append(p.cmd.Environ(), env...)
	p.cmd.Stdin, p.cmd.Stderr = slave, slave
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	p.out = bufio.NewScanner(out)
	return p
}

// waitScreen waits until the terminal shows text; false when the reads ended first.
func (p *ptyChild) waitScreen(text string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !strings.Contains(p.screen.String(), text) {
		if p.ended {
			return false
		}
		p.cond.Wait()
	}
	return true
}

// modeChanged reports whether the terminal's mode differs from before the child started.
func (p *ptyChild) modeChanged(t *testing.T) bool {
	t.Helper()
	now, err := term.GetState(p.slave.Fd())
	if err != nil {
		t.Fatal(err)
	}
	return *now != *p.before
}

// screenAfterExit closes this end of the terminal once the child has exited and returns all it
// wrote there.
func (p *ptyChild) screenAfterExit() string {
	p.slave.Close() // the master's reads end once no one holds the terminal
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.ended {
		p.cond.Wait()
	}
	return p.screen.String()
}

// TestSecondSignalRestoresTerminal: a second signal that comes while the dashboard still holds
// the terminal (raw, on the alternate screen) exits at once with the terminal put back as the
// process found it, then says so on a restored screen.
func TestSecondSignalRestoresTerminal(t *testing.T) {
	p := startOnPTY(t, []string{"ROSETOP_TEST_MAIN=stuck-raw"})
	waitLine(t, p.out, "ready")
	if !p.modeChanged(t) {
		t.Fatal("the child did not make the terminal raw")
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	waitLine(t, p.out, "cancelled")
	signalExit(t, p.cmd, p.out, syscall.SIGTERM, 143, "the second SIGTERM")
	if p.modeChanged(t) {
		t.Error("the terminal's mode after the exit differs from before: left raw")
	}
	got := p.screenAfterExit()
	on, notice := strings.Index(got, ansi.SetModeAltScreenSaveCursor), strings.Index(got, "again: exiting at once")
	if on < 0 || notice < on || !strings.Contains(got[on:notice], ansi.ResetModeAltScreenSaveCursor) || !strings.Contains(got[on:notice], ansi.ShowCursor) {
		t.Errorf("the terminal got %q: want the alternate screen left and the cursor shown before the notice", got)
	}
}

// TestSecondSignalWhileLoading: a second signal while the model still loads (the terminal's echo
// off, no dashboard drawn) exits with the terminal's mode put back and writes no dashboard reset
// (leaving an alternate screen that was never entered moves the cursor on some terminals).
func TestSecondSignalWhileLoading(t *testing.T) {
	p := startOnPTY(t, []string{"ROSETOP_TEST_MAIN=stuck-quiet"})
	waitLine(t, p.out, "ready")
	if !p.modeChanged(t) {
		t.Fatal("the child did not turn the echo off")
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	waitLine(t, p.out, "cancelled")
	signalExit(t, p.cmd, p.out, syscall.SIGINT, 130, "the second SIGINT")
	if p.modeChanged(t) {
		t.Error("the terminal's mode after the exit differs from before: the echo left off")
	}
	if got := p.screenAfterExit(); !strings.Contains(got, "again: exiting at once") || strings.Contains(got, ansi.ResetModeAltScreenSaveCursor) {
		t.Errorf("the terminal got %q: want the notice and no alternate screen's reset", got)
	}
}

// TestSignalWhileDashboardBuildsPrompts: the dashboard builds a large dataset's prompts before it
// takes the terminal, its echo off; Ctrl-C then ends the process with 130, the terminal as it
// was, and the dashboard never drawn.
func TestSignalWhileDashboardBuildsPrompts(t *testing.T) {
	p := startOnPTY(t, []string{"NO_COLOR=1", "TERM=xterm"}, "--device", "cpu", "--threads", "1", "--dataset", "random",
		"--input-len", "1000", "--output-len", "4", "--num-requests", "100000")
	if !p.waitScreen("loaded") { // the build starts now and takes minutes
		t.Fatal("the terminal closed before the model loaded")
	}
	if !p.modeChanged(t) {
		t.Error("the terminal echoes during the build: keys typed now would print over it")
	}
	signalExit(t, p.cmd, p.out, syscall.SIGINT, 130, "SIGINT during the build")
	if p.modeChanged(t) {
		t.Error("the terminal's mode after the exit differs from before")
	}
	if got := p.screenAfterExit(); strings.Contains(got, ansi.SetModeAltScreenSaveCursor) {
		t.Errorf("the dashboard was drawn: %q", got)
	}
}
