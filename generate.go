package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"rosetop/engine"
	"rosetop/engine/tokenizer"
	"rosetop/internal/sticky"
)

// generateFlags are `rosetop generate`'s options.
type generateFlags struct {
	model        string
	device       string
	prompt       string
	maxNewTokens int
	temperature  float64
	topK         int
	topP         float64
	seed         uint64
	stopOnEOS    bool
	paged        bool
	asJSON       bool
}

func parseGenerate(args []string) (generateFlags, error) {
	f := generateFlags{device: "auto", prompt: "Hello", maxNewTokens: 32}
	fs := flag.NewFlagSet("rosetop generate", flag.ContinueOnError)
	fs.StringVar(&f.model, "model", "", "model: a directory, a Hugging Face id (gpt2, distilgpt2, ...), random:NAME, or empty for the embedded tiny model")
	fs.StringVar(&f.device, "device", f.device, "auto (GPU when present), cpu or cuda")
	fs.StringVar(&f.prompt, "prompt", f.prompt, "prompt text")
	intVar(fs, &f.maxNewTokens, "max-new-tokens", 1, maxNewTokens, "tokens to generate")
	floatVar(fs, &f.temperature, "temperature", 0, 100, "sampling temperature; 0 is greedy")
	intVar(fs, &f.topK, "top-k", 0, 1<<24, "keep the K most likely tokens (0: off)")
	floatVar(fs, &f.topP, "top-p", 0, 1, "nucleus sampling threshold (0 or 1: off)")
	uint64Var(fs, &f.seed, "seed", "sampling seed, and random:NAME weights' (as bench's and serve's --seed)")
	noStop := fs.Bool("no-stop-on-eos", false, "keep generating after <|endoftext|>")
	fs.BoolVar(&f.paged, "paged-attn", false, "use the paged KV cache")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON (prompt ids, generated ids and text) instead of the text; a flag, not a file name")
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "Usage: rosetop generate [flags]\n\nPrints the model's continuation of --prompt.\n\nFlags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	if err := parseFlagSet(fs, args, usage); err != nil {
		if fs.NArg() > 0 && strings.HasPrefix(err.Error(), "unexpected argument") && boolGivenApart(fs, args) == "" {
			if fs.Lookup("json").Value.String() == "true" && strings.HasSuffix(fs.Arg(0), ".json") {
				return f, badFlag("unexpected argument %q: generate's --json is a switch that prints JSON on stdout (redirect it: --json > %s)", fs.Arg(0), fs.Arg(0))
			}
			return f, badFlag("unexpected argument %q (flags only; quote the prompt: --prompt \"...\")", fs.Arg(0))
		}
		return f, err
	}
	f.stopOnEOS = !*noStop
	if f.device != "auto" && f.device != "cpu" && f.device != "cuda" {
		return f, badFlag("--device: unknown device %q (valid: auto, cpu, cuda)", f.device)
	}
	return f, nil
}

// generateResult is --json's output.
type generateResult struct {
	Model        string  `json:"model"`
	Device       string  `json:"device"`
	Prompt       string  `json:"prompt"`
	PromptIDs    []int32 `json:"prompt_ids"`
	GeneratedIDs []int32 `json:"generated_ids"`
	Text         string  `json:"text"`
}

func runGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseGenerate(args)
	if err != nil {
		return parseErr(err)
	}
	m, err := engine.LoadModel(ctx, f.model, engine.LoadOptions{Progress: stderr, Seed: f.seed}) // random:NAME weights as bench and serve make them
	if err != nil {
		return err
	}
	defer m.Close()
	ids := m.Tokenizer.Encode(f.prompt)
	if len(ids) == 0 {
		return usageError{fmt.Errorf("--prompt is empty: nothing to continue")}
	}
	if n := m.Config.NPositions; len(ids) >= n {
		return usageError{fmt.Errorf("--prompt is %d tokens; the model's n_positions is %d", len(ids), n)}
	}
	e, err := engine.New(m, engine.Options{Device: f.device, Paged: f.paged, MaxBatch: 1})
	if err != nil {
		return err
	}
	defer e.Backend.Close()

	sp := engine.SamplingParams{Temperature: float32(f.temperature), TopK: f.topK, TopP: engine.TopPOf(f.topP), Seed: f.seed}
	stream := tokenizer.NewStream(m.Tokenizer)
	text := &sticky.Writer{W: stdout} // a closed or full stdout is an error once generation ends
	onToken := func(id int32) {
		if !f.asJSON {
			io.WriteString(text, stream.Push(id))
		}
	}
	if room := m.Config.NPositions - len(ids); f.maxNewTokens > room {
		fmt.Fprintf(stderr, "rosetop: the model has %d positions and the prompt takes %d: generating at most %d of --max-new-tokens %d\n",
			m.Config.NPositions, len(ids), room, f.maxNewTokens)
	}
	if m.RandomWeights {
		fmt.Fprintf(stderr, "rosetop: %s has random weights: expect gibberish (a real model: --model gpt2)\n", m.Name)
	}
	start := time.Now()
	var first time.Duration
	onTokenTimed := func(id int32) {
		if first == 0 {
			first = time.Since(start)
		}
		onToken(id)
	}
	// An interrupt (ctx cancelled) still prints the tokens generated so far, then exits 128+N.
	out, err := e.Generate(ctx, ids, f.maxNewTokens, sp, f.stopOnEOS, onTokenTimed)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if len(out) > 0 {
		wall := time.Since(start)
		fmt.Fprintf(stderr, "rosetop: %d tokens in %.3f s on %s: %.1f tokens/s, time to first token %.2f ms\n",
			len(out), wall.Seconds(), e.Backend.Device(), float64(len(out))/wall.Seconds(), float64(first)/1e6)
	}
	if !f.asJSON {
		if io.WriteString(text, stream.Flush()+"\n"); text.Err != nil {
			err = errors.Join(err, fmt.Errorf("stdout: %w", text.Err))
		}
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return errors.Join(err, enc.Encode(generateResult{
		Model: m.Name, Device: e.Backend.Device(), Prompt: f.prompt,
		PromptIDs: ids, GeneratedIDs: out, Text: m.Tokenizer.Decode(out),
	}))
}
