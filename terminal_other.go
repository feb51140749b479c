//go:build !linux

package main

// quietInput does nothing off Linux: keys typed while the model loads echo, and reach the
// dashboard once it starts.
func quietInput(int) (discard, restore func()) { return func() {}, func() {} }

// rawInput cannot tell off Linux: it says raw, so that a restore also leaves the dashboard's screen.
func rawInput(int) bool { return true }
