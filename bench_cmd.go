package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"

	"rosetop/bench"
	"rosetop/internal/atomicfile"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseOptions(ctx, args, stderr)
	if err != nil {
		return parseErr(err)
	}
	if err := checkOutputs(o, stdout); err != nil {
		return err
	}
	prov, err := o.provider()
	if err != nil {
		return err
	}
	opts := bench.SessionOptions{Provider: prov}
	var sess atomic.Pointer[bench.Session] // set when the session starts; read by the recorder's goroutine
	rec, err := startRecording(o, "bench", args, func() *bench.View {
		if s := sess.Load(); s != nil {
			return s.View()
		}
		return nil
	})
	if err != nil {
		return err
	}
	opts.Started = sess.Store
	return withCPUProfile(o.CPUProfilePath, func() error {
		err := bench.RunBench(ctx, o.sessionConfig(), opts, o.exports(), stdout, stderr)
		recErr := closeRecording(rec, o, stderr)
		if recErr != nil && errors.Is(err, context.Canceled) { // an interrupt's exit status wins; say what failed
			fmt.Fprintf(stderr, "rosetop: %v\n", oneLine(recErr))
			return err
		}
		return errors.Join(err, recErr)
	})
}

// checkOutputs refuses, before anything runs, output files that could not be written or that
// would overwrite each other or an input file, or that are stdout (where the report or summary
// goes) when stdout is a file or a pipe: the two would be mixed in one stream.
func checkOutputs(o options, stdout io.Writer) error {
	inputs := []struct{ flag, path string }{{"dataset-path", o.DatasetPath}, {"replay", o.Replay}}
	paths := []struct{ flag, path string }{{"json", o.JSONPath}, {"csv", o.CSVPath}, {"cpuprofile", o.CPUProfilePath}, {"save-trace", o.SaveTrace}, {"record", o.RecordPath}}
	if o.SaveTrace != "" && o.RepeatRuns > 1 {
		// Several measured runs write FILE-runK.jsonl each (FILE itself when only one finishes).
		for k := 1; k <= o.RepeatRuns; k++ {
			paths = append(paths, struct{ flag, path string }{"save-trace", bench.RunTracePath(o.SaveTrace, k)})
		}
	}
	seen := map[string]string{}
	failed := map[string]bool{} // flags already refused: one line each
	var errs []error
	for _, p := range paths {
		if p.path == "" || failed[p.flag] {
			continue
		}
		abs, err := filepath.Abs(p.path)
		if err != nil {
			errs = append(errs, usageError{fmt.Errorf("--%s %s: %w", p.flag, p.path, err)})
			continue
		}
		if other, ok := seen[abs]; ok {
			errs = append(errs, usageError{fmt.Errorf("--%s and --%s name the same file %s: give each its own", other, p.flag, p.path)})
			failed[p.flag] = true
			continue
		}
		seen[abs] = p.flag
		if in := slices.IndexFunc(inputs, func(in struct{ flag, path string }) bool { return in.path != "" && sameFile(in.path, p.path) }); in >= 0 {
			errs = append(errs, usageError{fmt.Errorf("--%s %s is the --%s file this run reads: give the output another path", p.flag, p.path, inputs[in].flag)})
			failed[p.flag] = true
			continue
		}
		if isStdout(p.path, stdout) {
			errs = append(errs, usageError{fmt.Errorf("--%s %s is standard output, where the report goes: give a file", p.flag, p.path)})
			failed[p.flag] = true
			continue
		}
		if err := atomicfile.Check(p.path); err != nil {
			errs = append(errs, usageError{fmt.Errorf("--%s %s: cannot write there: %w", p.flag, p.path, err)})
			failed[p.flag] = true
		}
	}
	return errors.Join(errs...)
}

// isStdout reports whether path is stdout, when stdout is a regular file or a pipe (a terminal
// or /dev/null takes both streams harmlessly).
func isStdout(path string, stdout io.Writer) bool {
	f, ok := stdout.(*os.File)
	if !ok {
		return false
	}
	so, err := f.Stat()
	if err != nil || so.Mode()&os.ModeCharDevice != 0 {
		return false
	}
	fi, err := os.Stat(path)
	return err == nil && os.SameFile(fi, so)
}

// sameFile reports whether paths a and b name one file: the same file when both exist (through
// links too), else the same absolute path.
func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(fa, fb)
	}
	absA, errA := filepath.Abs(a)
	absB, errB := filepath.Abs(b)
	return errA == nil && errB == nil && absA == absB
}
