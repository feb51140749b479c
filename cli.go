package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	"rosetop/bench"
	"rosetop/internal/atomicfile"
)

// helpShown is -h or --help asked of a command: its usage, which run prints on stdout (exit 0),
// as rosetop -h and rosetop help CMD do; a flag error's usage goes to stderr.
type helpShown struct{ usage []byte }

func (h *helpShown) Error() string { return flag.ErrHelp.Error() }
func (h *helpShown) Unwrap() error { return flag.ErrHelp }

// askedHelp is the error of a parse that met -h: usage's text, for run to print.
func askedHelp(usage func(io.Writer)) error {
	var b bytes.Buffer
	usage(&b)
	return &helpShown{usage: b.Bytes()}
}

// usageError marks bad flags or input (exit 2), as opposed to a failure while running (exit 1).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// parseErr classifies a flag-parsing error.
func parseErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err // a *helpShown: run prints its usage
	}
	return usageError{err}
}

// oneLine is err's message as rosetop prints it: on one line, control characters escaped (a
// newline in a file name the user gave), with the flag named where a library's error names only
// its value (flagNamed).
func oneLine(err error) string { return printable(flagNamed(err)) }

// lineError is an error whose message is on one line (oneLine), wrapping the error it prints.
type lineError struct{ err error }

func (e lineError) Error() string { return oneLine(e.err) }
func (e lineError) Unwrap() error { return e.err }

// printErrors writes err as "rosetop: ..." lines, one for each error joined in it (errors.Join:
// a JSON export and a CSV export can both fail), so that none is lost.
func printErrors(w io.Writer, err error) {
	if parts := joined(err); parts != nil {
		for _, e := range parts {
			printErrors(w, e)
		}
		return
	}
	fmt.Fprintf(w, "rosetop: %v\n", oneLine(err))
}

// joined returns the errors that errors.Join put together in err, or nil. An error that wraps
// several only to carry sentinels beside its cause (fmt.Errorf with two %w, a tagged error) has
// a message of its own, which is what must be printed: it is joined only when its message is
// its parts' messages, a line each.
func joined(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return nil
	}
	var parts []error
	var msgs []string
	for _, e := range j.Unwrap() {
		if e != nil {
			parts = append(parts, e)
			msgs = append(msgs, e.Error())
		}
	}
	if len(parts) == 0 || err.Error() != strings.Join(msgs, "\n") {
		return nil
	}
	return parts
}

// version is the binary's version, commit and commit date, from the build information Go
// records (go build and go install in a git checkout record the commit; -buildvcs=false does not).
func version() string {
	info, _ := debug.ReadBuildInfo()
	return formatVersion(info)
}

// formatVersion: "v0.0.0-20261124095435-adbec1f02f0b (commit adbec1f02f0b, 2026-11-24 09:54 UTC,
// with uncommitted changes), go1.26.8".
func formatVersion(info *debug.BuildInfo) string {
	if info == nil {
		return "(unknown: no build information)"
	}
	var rev, at string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	out := info.Main.Version
	if out == "" {
		out = "(devel)"
	}
	if rev == "" {
		return out + " (no commit recorded: built outside a git checkout or with -buildvcs=false), " + info.GoVersion
	}
	detail := "commit " + rev[:min(12, len(rev))]
	if t, err := time.Parse(time.RFC3339, at); err == nil {
		detail += ", " + t.UTC().Format("2006-01-02 15:04 UTC")
	}
	if dirty {
		detail += ", with uncommitted changes"
	}
	return out + " (" + detail + "), " + info.GoVersion
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

// withCPUProfile runs f under a Go CPU profile written to path ("" runs f alone). The profile is
// kept in memory and written atomically when f returns: an interrupted run leaves the old one.
func withCPUProfile(path string, f func() error) error {
	if path == "" {
		return f()
	}
	if err := atomicfile.Check(path); err != nil {
		return fmt.Errorf("--cpuprofile %s: cannot write there: %w", path, err)
	}
	var prof bytes.Buffer
	if err := pprof.StartCPUProfile(&prof); err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	runErr := f()
	pprof.StopCPUProfile()
	if err := atomicfile.Write(path, func(w io.Writer) error { _, err := prof.WriteTo(w); return err }); err != nil {
		return errors.Join(runErr, fmt.Errorf("--cpuprofile: %w", err))
	}
	return runErr
}
