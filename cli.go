package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strings"

	"rosetop/bench"
)

// errHelpShown means -h printed the help: exit 0.
var errHelpShown = errors.New("help shown")

// usageError marks bad flags or input (exit 2), as opposed to a failure while running (exit 1).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// parseErr classifies a flag-parsing error.
func parseErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return errHelpShown
	}
	return usageError{err}
}

// oneLine keeps an error message to its first line: every error rosetop prints is one line.
func oneLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return info.Main.Version
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// toolInfo is the build's module version and VCS revision, for the JSON exports.
func toolInfo() bench.ToolInfo {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return bench.ToolInfo{}
	}
	t := bench.ToolInfo{Version: info.Main.Version}
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			t.Commit = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && t.Commit != "" {
		t.Commit += "-dirty"
	}
	return t
}

// withCPUProfile runs f under a Go CPU profile written to path ("" runs f alone).
func withCPUProfile(path string, f func() error) error {
	if path == "" {
		return f()
	}
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	runErr := f()
	pprof.StopCPUProfile()
	if err := out.Close(); err != nil {
		return errors.Join(runErr, fmt.Errorf("--cpuprofile: %w", err))
	}
	return runErr
}
