package main

import (
	"context"
	"errors"
	"flag"
	"io"

	"rosetop/bench"
	"rosetop/tui"
)

// parseDashboard parses the dashboard's command line: the bench flags and --watch. It loops the
// decode-heavy job unless the user names another, or watches a server (--watch) and runs none.
func parseDashboard(ctx context.Context, args []string, stderr io.Writer) (options, error) {
	o, _, err := parseOptionsWith(ctx, args, stderr, func(_ *flag.FlagSet, o *options) { o.Job, o.command = "decode-heavy", "dashboard" }, benchUsage)
	return o, err
}

// runDashboard opens the live dashboard. However it ends (q, Ctrl-C, SIGTERM, SIGHUP: ctx is
// cancelled for a signal) the terminal is restored, the session's summary table goes to stdout
// and the --json/--csv files are written, so nothing measured is lost.
func runDashboard(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o, err := parseDashboard(ctx, args, stderr)
	if err != nil {
		return parseErr(err)
	}
	if o.SaveTrace != "" { // a trace a measured run: the looping dashboard would write one a window
		return usageError{badFlag("--save-trace writes each measured run of rosetop bench as a trace; the dashboard loops: use rosetop bench")}
	}
	if err := checkOutputs(o, stdout); err != nil {
		return err
	}
	prov, err := o.provider()
	if err != nil {
		return err
	}
	term, err := findTerminal(stdin, stderr, openTTY)
	if err != nil {
		return err
	}
	defer term.close()
	defer term.quiet()()
	return withCPUProfile(o.CPUProfilePath, func() error {
		// --watch runs no workload of its own: the load is the server's other clients'.
		opts := bench.SessionOptions{Provider: prov, Progress: term.out, KeepRecords: o.JSONPath != "" || o.CSVPath != "", External: o.Watch}
		sess, err := bench.NewSession(ctx, o.sessionConfig(), opts)
		if err != nil {
			return err
		}
		rec, err := startRecording(o, "dashboard", args, nil)
		if err != nil {
			return errors.Join(err, sess.Close())
		}
		runErr := tui.Run(ctx, tapped(sess, rec), term.options())
		closeErr := sess.Close()
		recErr := closeRecording(rec, o, stderr)
		repErr := sess.Report(stdout)
		expErr := sess.Export(o.exports(), stderr)
		err = errors.Join(runErr, closeErr, recErr, repErr, expErr)
		if ctx.Err() == nil {
			return err
		}
		// A signal: what was measured is out; say what failed, then exit 128+N.
		if err != nil {
			printErrors(stderr, err)
		}
		return bench.ErrInterrupted
	})
}
