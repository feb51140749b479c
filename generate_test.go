package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// cancelWriter cancels its context on the first write whose text contains when ("" for any).
type cancelWriter struct {
	buf    bytes.Buffer
	when   string
	cancel context.CancelFunc
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.when) {
		w.cancel()
	}
	return w.buf.Write(p)
}

// TestGenerateInterrupted checks that an interrupt mid-generation keeps what was generated: the
// text ends with its pending bytes and a newline, and --json still prints the result so far.
func TestGenerateInterrupted(t *testing.T) {
	args := []string{"generate", "--device", "cpu", "--prompt", "Hello", "--no-stop-on-eos"}
	_, oneToken, _ := runCLI(t, append(args, "--max-new-tokens", "1")...)

	t.Run("text", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stdout := &cancelWriter{cancel: cancel}
		var stderr bytes.Buffer
		code := run(ctx, append(args, "--max-new-tokens", "20"), strings.NewReader(""), stdout, &stderr)
		if code != exitInterrupted {
			t.Fatalf("exit %d, want %d (stderr %q)", code, exitInterrupted, stderr.String())
		}
		if got := stdout.buf.String(); got != oneToken {
			t.Errorf("stdout %q, want the first token's text and a newline %q", got, oneToken)
		}
	})
	t.Run("json", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var stdout bytes.Buffer
		stderr := &cancelWriter{cancel: cancel, when: "random weights"}
		code := run(ctx, append(args, "--max-new-tokens", "20", "--json"), strings.NewReader(""), &stdout, stderr)
		if code != exitInterrupted {
			t.Fatalf("exit %d, want %d (stderr %q)", code, exitInterrupted, stderr.buf.String())
		}
		var r generateResult
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			t.Fatalf("stdout %q is not the JSON result: %v", stdout.String(), err)
		}
		if len(r.PromptIDs) == 0 || len(r.GeneratedIDs) != 0 {
			t.Errorf("prompt ids %v, generated %v; want the prompt's ids and no token", r.PromptIDs, r.GeneratedIDs)
		}
	})
}

// TestGenerateTinyTopP checks that a --top-p below float32's least positive value keeps the top
// token (greedy's continuation), not the whole vocabulary as --top-p 0 (off) does.
func TestGenerateTinyTopP(t *testing.T) {
	args := []string{"generate", "--device", "cpu", "--prompt", "Hello", "--no-stop-on-eos", "--max-new-tokens", "6"}
	_, greedy, _ := runCLI(t, args...)
	code, got, stderr := runCLI(t, append(args, "--temperature", "1", "--seed", "3", "--top-p", "1e-50")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got != greedy {
		t.Errorf("--top-p 1e-50 generated %q, want greedy's %q", got, greedy)
	}
}

// TestGenerateSeedsRandomWeights: --seed seeds random:NAME weights as bench's and serve's do, so
// two seeds are two models (greedy, so only the weights can differ).
func TestGenerateSeedsRandomWeights(t *testing.T) {
	if raceEnabled {
		t.Skip("82M random weights twice: seconds each without the race detector, minutes with it")
	}
	out := func(seed string) string {
		code, got, stderr := runCLI(t, "generate", "--device", "cpu", "--model", "random:distilgpt2", "--seed", seed, "--prompt", "Hello", "--max-new-tokens", "3")
		if code != 0 {
			t.Fatalf("--seed %s: exit %d: %s", seed, code, stderr)
		}
		return got
	}
	if a, b := out("5"), out("6"); a == b {
		t.Errorf("--seed 5 and 6 both generated %q: the weights ignore the seed", a)
	}
}
