package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
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

// TestSecondSignalRestoresTerminal: a second signal that comes while the dashboard still holds
// the terminal (raw, on the alternate screen) exits at once with the terminal put back as the
// process found it, then says so on a restored screen.
func TestSecondSignalRestoresTerminal(t *testing.T) {
	master, slave := openPTY(t)
	defer master.Close()
	before, err := term.GetState(slave.Fd())
	if err != nil {
		t.Fatal(err)
	}
	var screen bytes.Buffer // what the child wrote on the terminal; read until the child is gone
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			screen.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	cmd := childCmd(t)
	cmd.Env = append(cmd.Environ(), "ROSETOP_TEST_MAIN=stuck-raw")
	cmd.Stdin, cmd.Stderr = slave, slave
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	waitLine(t, sc, "ready")
	if now, err := term.GetState(slave.Fd()); err != nil || *now == *before {
		t.Fatalf("the child did not make the terminal raw (%v)", err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	waitLine(t, sc, "cancelled")
	signalExit(t, cmd, sc, syscall.SIGTERM, 143, "the second SIGTERM")
	after, err := term.GetState(slave.Fd())
	if err != nil || *after != *before {
		t.Errorf("the terminal's mode after the exit differs from before (%v): left raw", err)
	}
	slave.Close() // the master's reads end once no one holds the terminal
	<-read
	got := screen.String()
	on, notice := strings.Index(got, ansi.SetModeAltScreenSaveCursor), strings.Index(got, "again: exiting at once")
	if on < 0 || notice < on || !strings.Contains(got[on:notice], ansi.ResetModeAltScreenSaveCursor) || !strings.Contains(got[on:notice], ansi.ShowCursor) {
		t.Errorf("the terminal got %q: want the alternate screen left and the cursor shown before the notice", got)
	}
}

// TestSecondSignalWhileLoading: a second signal while the model still loads (the terminal's echo
// off, no dashboard drawn) exits with the terminal's mode put back and writes no dashboard reset
// (leaving an alternate screen that was never entered moves the cursor on some terminals).
func TestSecondSignalWhileLoading(t *testing.T) {
	master, slave := openPTY(t)
	defer master.Close()
	before, err := term.GetState(slave.Fd())
	if err != nil {
		t.Fatal(err)
	}
	var screen bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			screen.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	cmd := childCmd(t)
	cmd.Env = append(cmd.Environ(), "ROSETOP_TEST_MAIN=stuck-quiet")
	cmd.Stdin, cmd.Stderr = slave, slave
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	waitLine(t, sc, "ready")
	if now, err := term.GetState(slave.Fd()); err != nil || *now == *before {
		t.Fatalf("the child did not turn the echo off (%v)", err)
	}
	cmd.Process.Signal(syscall.SIGINT)
	waitLine(t, sc, "cancelled")
	signalExit(t, cmd, sc, syscall.SIGINT, 130, "the second SIGINT")
	if after, err := term.GetState(slave.Fd()); err != nil || *after != *before {
		t.Errorf("the terminal's mode after the exit differs from before (%v): the echo left off", err)
	}
	slave.Close()
	<-read
	if got := screen.String(); !strings.Contains(got, "again: exiting at once") || strings.Contains(got, ansi.ResetModeAltScreenSaveCursor) {
		t.Errorf("the terminal got %q: want the notice and no alternate screen's reset", got)
	}
}

// TestSignalWhileDashboardBuildsPrompts: the dashboard builds a large dataset's prompts before it
// takes the terminal; Ctrl-C then ends the process with 130, the terminal as it was, and the
// dashboard never drawn.
func TestSignalWhileDashboardBuildsPrompts(t *testing.T) {
	master, slave := openPTY(t)
	defer master.Close()
	before, err := term.GetState(slave.Fd())
	if err != nil {
		t.Fatal(err)
	}
	cmd := childCmd(t, "--device", "cpu", "--threads", "1", "--dataset", "random", "--input-len", "1000",
		"--output-len", "4", "--num-requests", "100000")
	cmd.Env = append(cmd.Environ(), "NO_COLOR=1", "TERM=xterm")
	cmd.Stdin, cmd.Stderr = slave, slave
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var screen strings.Builder // what the child wrote on the terminal
	loaded, read := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(read)
		buf, once := make([]byte, 4096), false
		for {
			n, err := master.Read(buf)
			screen.Write(buf[:n])
			if !once && strings.Contains(screen.String(), "loaded") {
				once = true
				close(loaded)
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-loaded: // the build starts now and takes minutes
	case <-read:
		t.Fatal("the terminal closed before the model loaded")
	}
	if now, err := term.GetState(slave.Fd()); err != nil || *now == *before {
		t.Errorf("the terminal echoes during the build (%v): keys typed now would print over it", err)
	}
	signalExit(t, cmd, bufio.NewScanner(out), syscall.SIGINT, 130, "SIGINT during the build")
	after, err := term.GetState(slave.Fd())
	if err != nil || *after != *before {
		t.Errorf("the terminal's mode after the exit differs from before (%v)", err)
	}
	slave.Close()
	<-read
	if got := screen.String(); strings.Contains(got, ansi.SetModeAltScreenSaveCursor) {
		t.Errorf("the dashboard was drawn: %q", got)
	}
}
