// Command rosetop is `top` for LLM inference: a terminal dashboard over a real GPT-2 engine
// (CUDA on a GPU, pure Go on a CPU) and a continuous-batching scheduler.
//
//	rosetop [flags]            the live dashboard (embedded tiny model, best device, decode-heavy job looping)
//	rosetop bench [flags]      the same engine and workload headless: the seeds' benchmark report
//	rosetop generate [flags]   one prompt's continuation
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"rosetop/bench"
)

// exitUsage is the exit code for bad flags or input; exitFail for a failure while running.
const (
	exitUsage = 2
	exitFail  = 1
	// exitInterrupted is 128+SIGINT, as shells report a Ctrl-C.
	exitInterrupted = 130
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches the subcommand and turns errors into one line on stderr and an exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd, rest := "", args
	if len(args) > 0 {
		switch args[0] {
		case "bench", "generate", "dashboard", "help", "version":
			cmd, rest = args[0], args[1:]
		case "-h", "-help", "--help":
			cmd, rest = "help", nil
		}
	}
	var err error
	switch cmd {
	case "", "dashboard":
		err = runDashboard(ctx, rest, stdin, stdout, stderr)
	case "bench":
		err = runBench(ctx, rest, stdout, stderr)
	case "generate":
		err = runGenerate(ctx, rest, stdout, stderr)
	case "help":
		usage(stdout)
		return 0
	case "version":
		fmt.Fprintln(stdout, "rosetop", version())
		return 0
	}
	if err == nil || errors.Is(err, errHelpShown) {
		return 0
	}
	if errors.Is(err, bench.ErrInterrupted) {
		// Ctrl-C: what finished was already printed; the conventional status for SIGINT.
		return exitInterrupted
	}
	fmt.Fprintf(stderr, "rosetop: %v\n", oneLine(err))
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFail
}

func usage(w io.Writer) {
	fmt.Fprint(w, `rosetop: top for LLM inference — a live dashboard over a real GPT-2 engine.

Usage:
  rosetop [flags]            open the dashboard (default: embedded tiny model, best device, decode-heavy job)
  rosetop bench [flags]      run the benchmark headless and print the report
  rosetop generate [flags]   print one prompt's continuation
  rosetop help | version

'rosetop bench -h' and 'rosetop generate -h' list every flag (the dashboard takes the bench flags).
`)
}
