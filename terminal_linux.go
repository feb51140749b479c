//go:build linux

package main

import "golang.org/x/sys/unix"

// quietInput turns off the echo of the terminal open at fd, keeping its line editing and its
// signals (Ctrl-C still interrupts). discard drops the input typed since; restore puts the mode
// back. Both do nothing when fd is not a terminal.
func quietInput(fd int) (discard, restore func()) {
	noop := func() {}
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return noop, noop
	}
	saved := *t
	t.Lflag &^= unix.ECHO | unix.ECHONL
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, t); err != nil {
		return noop, noop
	}
	return func() { unix.IoctlSetInt(fd, unix.TCFLSH, unix.TCIFLUSH) },
		func() { unix.IoctlSetTermios(fd, unix.TCSETS, &saved) }
}

// rawInput reports whether the terminal open at fd reads keys one by one (a dashboard's raw
// mode), not by lines.
func rawInput(fd int) bool {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil && t.Lflag&unix.ICANON == 0
}
