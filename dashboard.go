package main

import (
	"context"
	"errors"
	"io"

	"rosetop/bench"
	"rosetop/tui"
)

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
