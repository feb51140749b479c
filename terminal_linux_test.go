package main

import (
	"bufio"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestQuietInput: keys typed on a terminal while the model loads are not echoed, and discardKeys
// drops them before the dashboard reads its first key; restore brings the echo back.
func TestQuietInput(t *testing.T) {
	master, slave := openPTY(t)
	defer master.Close()
	defer slave.Close()
	term := dashTerminal{in: slave, out: slave}
	restore := term.quiet()
	if _, err := master.WriteString("q\n"); err != nil { // typed during the load
		t.Fatal(err)
	}
	// The line is in the terminal's input once the slave polls readable (canonical mode).
	fds := []unix.PollFd{{Fd: int32(slave.Fd()), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 10_000); n != 1 || err != nil {
		t.Fatalf("the typed line never reached the terminal's input: %d %v", n, err)
	}
	term.discardKeys()
	if _, err := master.WriteString("x\n"); err != nil { // typed on the dashboard
		t.Fatal(err)
	}
	line, err := bufio.NewReader(slave).ReadString('\n')
	if err != nil || line != "x\n" {
		t.Fatalf("the first line read after discardKeys: %q %v, want %q: the keys typed during the load were kept", line, err, "x\n")
	}
	restore()
	if _, err := master.WriteString("e\n"); err != nil {
		t.Fatal(err)
	}
	echo, err := bufio.NewReader(master).ReadString('\n')
	if err != nil || strings.TrimRight(echo, "\r\n") != "e" {
		t.Fatalf("the terminal echoed %q (%v) first, want only the key typed after restore (e)", echo, err)
	}
}
