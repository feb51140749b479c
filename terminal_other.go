//go:build !linux

package main

// quietInput does nothing off Linux: keys typed while the model loads echo.
func quietInput(int) (restore func()) { return func() {} }

// rawInput cannot tell off Linux: it says raw, so that a restore also leaves the dashboard's screen.
func rawInput(int) bool { return true }
