// Command rosetop is `top` for LLM inference: a terminal dashboard over a real GPT-2 engine
// (CUDA on a GPU, pure Go on a CPU) and a continuous-batching scheduler.
//
//	rosetop [flags]            the live dashboard (embedded tiny model, best device, decode-heavy job looping)
//	rosetop bench [flags]      the same engine and workload headless: the seeds' benchmark report
//	rosetop serve [flags]      the engine behind OpenAI's API, with Prometheus metrics
//	rosetop sweep [flags]      bench runs over one setting's values: a table, JSON, CSV and charts
//	rosetop generate [flags]   one prompt's continuation
//	rosetop replay FILE        a dashboard recorded with --record, played back (--summary: headless)
//
// Exit status: 0 success, 1 a failure while running, 2 bad flags or input, 128+N when signal N
// (SIGINT 130, SIGTERM 143, SIGHUP 129) interrupted the run (serve exits 0 after its graceful
// shutdown); a second signal exits at once.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"rosetop/bench"
	"rosetop/engine"
	"rosetop/engine/hub"
	"rosetop/internal/sticky"
	"rosetop/remote"
	"rosetop/sched"
)

// Exit statuses.
const (
	exitFail  = 1 // a failure while running
	exitUsage = 2 // bad flags or input
	// exitInterrupted is 128+SIGINT, as shells report a Ctrl-C; main turns it into 128+N for
	// the signal that actually came.
	exitInterrupted = 130
)

// commands are the subcommands, in the order help lists them.
var commands = []string{"bench", "serve", "sweep", "generate", "replay", "dashboard", "help", "version"}

func main() {
	sig := watchSignals(os.Stdin, os.Stdout, os.Stderr)
	code := run(sig.ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	if n := sig.first(); n != 0 && code == exitInterrupted {
		code = 128 + n
	}
	sig.stop()
	os.Exit(code)
}

// run dispatches the subcommand and turns errors into one line on stderr and an exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd, rest := "dashboard", args
	if len(args) > 0 {
		switch a := args[0]; {
		case a == "-h" || a == "-help" || a == "--help":
			cmd, rest = "help", args[1:]
		case a == "-version" || a == "--version":
			cmd, rest = "version", args[1:]
		case !strings.HasPrefix(a, "-"):
			cmd, rest = a, args[1:]
		}
	}
	var err error
	switch cmd {
	case "dashboard":
		err = runDashboard(ctx, rest, stdin, stdout, stderr)
	case "bench":
		err = runBench(ctx, rest, stdout, stderr)
	case "serve":
		err = runServe(ctx, rest, stdin, stdout, stderr)
	case "sweep":
		err = runSweep(ctx, rest, stdout, stderr)
	case "generate":
		err = runGenerate(ctx, rest, stdout, stderr)
	case "replay":
		err = runReplay(ctx, rest, stdin, stdout, stderr)
	case "help":
		if len(rest) == 1 && slices.Contains(commands, rest[0]) && rest[0] != "help" && rest[0] != "version" {
			// help CMD: CMD's flags, on stdout; a stdout that did not take them is a failure.
			out := &sticky.Writer{W: stdout}
			if code := run(ctx, []string{rest[0], "-h"}, stdin, out, out); out.Err == nil {
				return code
			}
			err = fmt.Errorf("stdout: %w", out.Err)
			break
		}
		if len(rest) == 1 && (rest[0] == "-h" || rest[0] == "-help" || rest[0] == "--help") {
			rest = nil // help -h: the usage
		}
		if len(rest) > 0 && !(len(rest) == 1 && slices.Contains(commands, rest[0])) {
			err = badFlag("help takes a command, one of %s; got %q%s", strings.Join(commands, ", "), strings.Join(rest, " "), suggest(rest[0], commands))
			break
		}
		out := &sticky.Writer{W: stdout}
		if usage(out); out.Err != nil {
			err = fmt.Errorf("stdout: %w", out.Err)
		}
	case "version":
		if len(rest) > 0 {
			err = badFlag("version takes no arguments, got %q", strings.Join(rest, " "))
			break
		}
		if _, werr := fmt.Fprintln(stdout, "rosetop", version()); werr != nil {
			err = fmt.Errorf("stdout: %w", werr)
		}
	default:
		err = badFlag("unknown command %q%s (commands: %s)", cmd, suggest(cmd, commands), strings.Join(commands, ", "))
	}
	var help *helpShown
	if errors.As(err, &help) { // asked for: the usage on stdout, which must take it
		if _, werr := stdout.Write(help.usage); werr != nil {
			printErrors(stderr, fmt.Errorf("stdout: %w", werr))
			return exitFail
		}
		return 0
	}
	if err == nil {
		return 0
	}
	if errors.Is(err, context.Canceled) {
		if !errors.Is(err, bench.ErrInterrupted) { // bench has printed what finished
			fmt.Fprintln(stderr, "rosetop: interrupted")
		}
		return exitInterrupted
	}
	printErrors(stderr, err)
	return exitCode(err)
}

// exitCode is 2 for errors in what the user gave (flags, the model, its files, a device that is
// not there) and 1 for failures while running.
func exitCode(err error) int {
	var ue usageError
	for _, bad := range []error{errBadFlag, bench.ErrBadConfig, sched.ErrBadConfig, engine.ErrInvalidModel,
		engine.ErrModelNotFound, engine.ErrUnknownArch, engine.ErrModelTooLarge, engine.ErrBadOptions, engine.ErrNoCUDA, hub.ErrInvalidID, hub.ErrNotCached,
		hub.ErrNotFound, hub.ErrDenied, remote.ErrConfig} {
		if errors.Is(err, bad) {
			return exitUsage
		}
	}
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFail
}

// suggest returns ` (did you mean "x"?)` for the candidate nearest to s, or "".
func suggest(s string, candidates []string) string {
	if c := closest(s, candidates); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

func usage(w io.Writer) {
	fmt.Fprint(w, `rosetop: top for LLM inference — a live dashboard over a real GPT-2 engine.

Usage:
  rosetop [flags]            open the dashboard (default: embedded tiny model, best device, decode-heavy job)
                             (--endpoint URL: over a server; --endpoint URL --watch: watch it, no load)
  rosetop bench [flags]      run the benchmark headless and print the report
  rosetop serve [flags]      serve the engine over OpenAI's API with Prometheus metrics
                             (--dashboard: watch its traffic live)
  rosetop sweep [flags]      run it over a list of request rates, concurrency limits or prefill
                             batch sizes: a table, JSON, CSV and PNG/SVG charts
  rosetop generate [flags]   print one prompt's continuation
  rosetop replay FILE        play back a dashboard recorded with --record FILE (the dashboard,
                             bench and serve take it): seek, pause, speed; --summary prints its
                             runs headless
  rosetop help [COMMAND]     the usage, or one command's flags
  rosetop version            the version, commit and commit date

'rosetop bench -h', 'rosetop serve -h', 'rosetop sweep -h', 'rosetop generate -h' and
'rosetop replay -h' list every flag (the dashboard takes the bench flags).

Exit status: 0 success, 1 a failure while running, 2 bad flags or input, 128+N after signal N
(Ctrl-C 130, SIGTERM 143, SIGHUP 129; rosetop serve exits 0 after its graceful shutdown); a
second signal exits at once.
`)
}
