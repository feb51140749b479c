package main

import (
	"bufio"
	"strings"
	"testing"
)

// TestQuietInput: keys typed on a terminal while the model loads are not echoed and stay queued
// for the dashboard; restore brings the echo back.
func TestQuietInput(t *testing.T) {
	master, slave := openPTY(t)
	defer master.Close()
	defer slave.Close()
	restore := dashTerminal{in: slave, out: slave}.quiet()
	if _, err := master.WriteString("q\n"); err != nil { // typed during the load
		t.Fatal(err)
	}
	line, err := bufio.NewReader(slave).ReadString('\n')
	if err != nil || line != "q\n" {
		t.Fatalf("the dashboard's first read: %q %v, want the key typed during the load (q)", line, err)
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
