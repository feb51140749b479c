package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"rosetop/engine"
	"rosetop/engine/tokenizer"
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

func parseGenerate(args []string, stderr io.Writer) (generateFlags, error) {
	var f generateFlags
	fs := flag.NewFlagSet("rosetop generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.model, "model", "", "model: a directory, a Hugging Face id (gpt2, distilgpt2, ...), random:NAME, or empty for the embedded tiny model")
	fs.StringVar(&f.device, "device", "auto", "auto (GPU when present), cpu or cuda")
	fs.StringVar(&f.prompt, "prompt", "Hello", "prompt text")
	fs.IntVar(&f.maxNewTokens, "max-new-tokens", 32, "tokens to generate (>= 1)")
	fs.Float64Var(&f.temperature, "temperature", 0, "sampling temperature; 0 is greedy")
	fs.IntVar(&f.topK, "top-k", 0, "keep the K most likely tokens (0: off)")
	fs.Float64Var(&f.topP, "top-p", 0, "nucleus sampling threshold (0 or 1: off)")
	fs.Uint64Var(&f.seed, "seed", 0, "sampling seed")
	noStop := fs.Bool("no-stop-on-eos", false, "keep generating after <|endoftext|>")
	fs.BoolVar(&f.paged, "paged-attn", false, "use the paged KV cache")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON: prompt ids, generated ids and text")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: rosetop generate [flags]\n\nPrints the model's continuation of --prompt.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q (flags only; quote the prompt: --prompt \"...\")", fs.Arg(0))
	}
	f.stopOnEOS = !*noStop
	switch {
	case f.maxNewTokens <= 0:
		return f, fmt.Errorf("--max-new-tokens must be >= 1, got %d", f.maxNewTokens)
	case f.temperature < 0:
		return f, fmt.Errorf("--temperature must be >= 0, got %g", f.temperature)
	case f.topK < 0:
		return f, fmt.Errorf("--top-k must be >= 0, got %d", f.topK)
	case f.topP < 0 || f.topP > 1:
		return f, fmt.Errorf("--top-p must be in [0, 1], got %g", f.topP)
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
	f, err := parseGenerate(args, stderr)
	if err != nil {
		return parseErr(err)
	}
	m, err := engine.LoadModel(ctx, f.model, engine.LoadOptions{Progress: stderr})
	if err != nil {
		return usageError{err}
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
		return usageError{err}
	}
	defer e.Backend.Close()

	sp := engine.SamplingParams{Temperature: float32(f.temperature), TopK: f.topK, TopP: float32(f.topP), Seed: f.seed}
	stream := tokenizer.NewStream(m.Tokenizer)
	onToken := func(id int32) {
		if !f.asJSON {
			io.WriteString(stdout, stream.Push(id))
		}
	}
	out, err := e.Generate(ctx, ids, f.maxNewTokens, sp, f.stopOnEOS, onToken)
	if err != nil {
		return err
	}
	if !f.asJSON {
		io.WriteString(stdout, stream.Flush()+"\n")
		return nil
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(generateResult{
		Model: m.Name, Device: e.Backend.Device(), Prompt: f.prompt,
		PromptIDs: ids, GeneratedIDs: out, Text: m.Tokenizer.Decode(out),
	})
}
