package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"

	"rosetop/bench"
	"rosetop/engine"
	"rosetop/record"
	"rosetop/tui"
)

// startRecording starts --record's recorder for command run with args. sample is nil when a
// dashboard reads the views (record them through Recorder.Tap); otherwise the recorder reads
// it every tick. A nil recorder when --record was not given.
func startRecording(o options, command string, args []string, sample func() *bench.View) (*record.Recorder, error) {
	if o.RecordPath == "" {
		return nil, nil
	}
	m := record.Meta{Tool: "rosetop " + version(), Commit: toolInfo().Commit, Command: command, Args: redactedArgs(args)}
	m.Host, _ = os.Hostname()
	if o.Device != "cpu" {
		if gpu, ok := engine.ProbeGPU(); ok {
			m.GPU = gpu
		}
	}
	rec, err := record.Create(o.RecordPath, record.Options{Meta: m, Sample: sample})
	if err != nil {
		return nil, usageError{fmt.Errorf("--record %s: %w", o.RecordPath, err)}
	}
	return rec, nil
}

// tapped is s recorded by rec (s itself without a recorder).
func tapped(s tui.Session, rec *record.Recorder) tui.Session {
	if rec == nil {
		return s
	}
	return rec.Tap(s)
}

// closeRecording closes rec (nil: none) and says where the recording went.
func closeRecording(rec *record.Recorder, o options, stderr io.Writer) error {
	if rec == nil {
		return nil
	}
	if err := rec.Close(); err != nil {
		return err
	}
	if rec.Empty() {
		fmt.Fprintf(stderr, "rosetop: nothing recorded before the end: %s left as it was\n", o.RecordPath)
		return nil
	}
	if fi, err := os.Stat(o.RecordPath); err == nil && !fi.Mode().IsRegular() {
		fmt.Fprintf(stderr, "rosetop: wrote the recording to %s\n", o.RecordPath) // a pipe or a device
		return nil
	}
	fmt.Fprintf(stderr, "rosetop: wrote %s: rosetop replay %s plays it back\n", o.RecordPath, o.RecordPath)
	return nil
}

func replayUsage(w io.Writer) {
	fmt.Fprint(w, `usage: rosetop replay [flags] FILE

Plays a recording made with --record back in the dashboard: space pauses, ← → seek 5 s,
< > change the speed (0.25x to 16x), home end jump to the start and the end, n N to the next and
previous event, q quits. The engine keys do nothing: the recording shows what they did.

Flags:
`)
	fs := newReplayFlagSet(&replayOptions{speed: 1})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

type replayOptions struct {
	summary bool
	speed   float64
}

func newReplayFlagSet(ro *replayOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("rosetop replay", flag.ContinueOnError)
	fs.BoolVar(&ro.summary, "summary", ro.summary, "print the recording's header, every run it holds and each engine's ledger, headless")
	floatVar(fs, &ro.speed, "speed", 0.25, 16, "playback speed: 0.25, 0.5, 1, 2, 4, 8 or 16")
	return fs
}

// parseReplay parses `rosetop replay`'s flags, before or after the file.
func parseReplay(args []string) (string, replayOptions, error) {
	ro := replayOptions{speed: 1}
	fs := newReplayFlagSet(&ro)
	fs.SetOutput(io.Discard)
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", ro, askedHelp(replayUsage)
			}
			return "", ro, badFlag("%s", withSuggestion(fs, err))
		}
		if fs.NArg() == 0 {
			break
		}
		files, args = append(files, fs.Arg(0)), fs.Args()[1:]
	}
	if len(files) != 1 {
		return "", ro, badFlag("rosetop replay takes one recording, got %d (usage: rosetop replay [--summary] FILE)", len(files))
	}
	if frac, _ := math.Frexp(ro.speed); frac != 0.5 { // the dashboard's speeds are powers of two
		return "", ro, badFlag("--speed %g: want 0.25, 0.5, 1, 2, 4, 8 or 16", ro.speed)
	}
	return files[0], ro, nil
}

// runReplay is `rosetop replay FILE`: the recording in the dashboard, or with --summary its runs
// and ledgers on stdout. A file that is not a recording (or none, or from a newer rosetop) is one
// line and exit 2; one cut short replays up to its last whole view and says where it stops.
func runReplay(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	path, ro, err := parseReplay(args)
	if err != nil {
		return parseErr(err)
	}
	rec, err := record.Open(path)
	if err != nil {
		return usageError{err}
	}
	if ro.summary {
		defer rec.Close()
		return record.WriteSummary(stdout, rec)
	}
	rp, err := record.NewReplay(rec, record.ReplayOptions{Speed: ro.speed})
	if err != nil {
		rec.Close()
		return usageError{fmt.Errorf("%s: %w", path, err)}
	}
	defer rp.Close()
	term, err := findTerminal(stdin, stderr, openTTY)
	switch {
	case errors.Is(err, errNoTerminal):
		return usageError{fmt.Errorf("the replay needs a terminal, and there is none: rosetop replay --summary %s prints it headless", path)}
	case errors.Is(err, errDumbTerminal):
		return usageError{fmt.Errorf("the replay needs a terminal that can move the cursor, and TERM=dumb says this one cannot: rosetop replay --summary %s prints it headless", path)}
	}
	if err != nil {
		return err
	}
	defer term.close()
	runErr := tui.Run(ctx, rp, term.options())
	if note := record.StopNote(rec); note != "" {
		fmt.Fprintf(stderr, "rosetop: %s: %s\n", path, note)
	}
	if runErr == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return runErr
}
