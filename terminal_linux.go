//go:build linux

package main

import "golang.org/x/sys/unix"

// quietInput turns off the echo of the terminal open at fd, keeping its line editing, its
// signals (Ctrl-C still interrupts) and what is typed, and returns what puts the mode back; it
// does nothing when fd is not a terminal.
func quietInput(fd int) (restore func()) {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return func() {}
	}
	saved := *t
	t.Lflag &^= unix.ECHO | unix.ECHONL
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, t); err != nil {
		return func() {}
	}
	return func() { unix.IoctlSetTermios(fd, unix.TCSETS, &saved) }
}

// rawInput reports whether the terminal open at fd reads keys one by one (a dashboard's raw
// mode), not by lines.
func rawInput(fd int) bool {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil && t.Lflag&unix.ICANON == 0
}
