package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strings"

	"rosetop/bench"
	"rosetop/internal/atomicfile"
	"rosetop/tui"
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

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return parseErr(err)
	}
	if err := checkOutputs(o); err != nil {
		return err
	}
	exp := bench.Exports{JSONPath: o.JSONPath, CSVPath: o.CSVPath, Settings: o}
	opts := bench.SessionOptions{Provider: bench.NewInProcess(o.inProcess())}
	return withCPUProfile(o.CPUProfilePath, func() error { return bench.RunBench(ctx, o.sessionConfig(), opts, exp, stdout, stderr) })
}

// checkOutputs refuses, before anything runs, output files that could not be written or that
// would overwrite each other.
func checkOutputs(o options) error {
	paths := []struct{ flag, path string }{{"json", o.JSONPath}, {"csv", o.CSVPath}, {"cpuprofile", o.CPUProfilePath}}
	seen := map[string]string{}
	for _, p := range paths {
		if p.path == "" {
			continue
		}
		abs, err := filepath.Abs(p.path)
		if err != nil {
			return usageError{fmt.Errorf("--%s %s: %w", p.flag, p.path, err)}
		}
		if other, ok := seen[abs]; ok {
			return usageError{fmt.Errorf("--%s and --%s name the same file %s: give each its own", other, p.flag, p.path)}
		}
		seen[abs] = p.flag
		if err := atomicfile.Check(p.path); err != nil {
			return usageError{fmt.Errorf("--%s %s: cannot write there: %w", p.flag, p.path, err)}
		}
	}
	return nil
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

// runDashboard opens the live dashboard; on quit it prints the run summaries so far to stdout,
// so nothing measured is lost.
func runDashboard(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	// The dashboard loops the decode-heavy job unless the user names another (a later --job wins).
	o, err := parseOptions(append([]string{"--job", "decode-heavy"}, args...), stderr)
	if err != nil {
		return parseErr(err)
	}
	if err := checkOutputs(o); err != nil {
		return err
	}
	return withCPUProfile(o.CPUProfilePath, func() error {
		sess, err := bench.NewSession(ctx, o.sessionConfig(), bench.SessionOptions{Provider: bench.NewInProcess(o.inProcess()), Progress: stderr})
		if err != nil {
			return err
		}
		runErr := tui.Run(ctx, sess, tui.Options{Input: stdin, Output: stderr, AltScreen: true})
		closeErr := sess.Close()
		repErr := sess.Report(stdout)
		return errors.Join(runErr, closeErr, repErr)
	})
}
