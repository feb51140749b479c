package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"unicode/utf8"
)

// sonnetBase opens every sonnet prompt, as vLLM's SonnetDataset (vllm/benchmarks/datasets/sonnet.py).
const sonnetBase = "Pick as many lines as you can from these poem lines:\n"

// maxSonnetDraws bounds a sonnet sample's draws per prompt kept: vLLM draws until enough prompts
// fit, which never ends when none can.
const maxSonnetDraws = 1000

// parseSonnet reads a text file's lines as vLLM's SonnetDataset does (Python's readlines on a
// UTF-8 file): every line, blank ones too, with its newline ("\r\n" read as "\n").
func parseSonnet(ctx context.Context, r io.Reader) ([]datasetRow, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), maxLineBytes)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) { // bufio.ScanLines, keeping the newline
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			return i + 1, data[:i+1], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	var rows []datasetRow
	for n := 1; sc.Scan(); n++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		line := sc.Bytes()
		switch {
		case !utf8.Valid(line):
			return nil, fmt.Errorf("line %d: not UTF-8 text", n)
		case len(rows) >= maxDatasetRows:
			return nil, fmt.Errorf("more than %d lines: split the file", maxDatasetRows)
		}
		text := string(line)
		if strings.HasSuffix(text, "\r\n") {
			text = text[:len(text)-2] + "\n"
		}
		rows = append(rows, datasetRow{prompt: text, line: n})
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return nil, fmt.Errorf("a line is longer than %d bytes", maxLineBytes)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, errors.New("no lines: want a text file of lines (vLLM's sonnet.txt)")
	}
	return rows, nil
}

// validateSonnet checks sonnet's lengths before its file's lines are counted.
func (d *Dataset) validateSonnet() error {
	bad := func(format string, args ...any) error { return &ConfigError{msg: fmt.Sprintf(format, args...)} }
	switch {
	case len(d.rows) == 0:
		return bad("%s: no rows loaded", d.source())
	case d.InputLen < 1 || d.InputLen > maxRequestTokens:
		return bad("--sonnet-input-len must be from 1 to %d, got %d", maxRequestTokens, d.InputLen)
	case d.OutputLen < 1 || d.OutputLen > maxRequestTokens:
		return bad("--sonnet-output-len must be from 1 to %d, got %d", maxRequestTokens, d.OutputLen)
	case d.PrefixLen < 0 || d.PrefixLen > maxRequestTokens:
		return bad("--sonnet-prefix-len must be from 0 to %d, got %d", maxRequestTokens, d.PrefixLen)
	}
	return nil
}

// sampleSonnet is vLLM's sonnet dataset (sonnet.py): a prompt is sonnetBase, the file's first
// lines (a prefix shared by every request) and lines drawn with replacement, as many as make
// about --sonnet-input-len tokens at the lines' mean length (counts rounded half to even, as
// Python's round); a draw is kept when the prompt has at most --sonnet-input-len tokens, else
// drawn again. GPT-2 has no chat template, so prompts are counted as written where vLLM counts
// them templated (and sends them templated to a completions API).
// Draws are made in order from one seeded stream and tokenized on the build's workers, as many
// at a time as are still wanted, and kept in that order: the sample is the same for any number
// of workers.
func (d *Dataset) sampleSonnet(b build, n, positions int, voc vocab) ([]sampled, error) {
	if err := d.validateSonnet(); err != nil {
		return nil, err
	}
	if d.InputLen+d.OutputLen > positions {
		return nil, &ConfigError{msg: fmt.Sprintf("--sonnet-input-len %d and --sonnet-output-len %d reach %d tokens, more than the model's %d positions", d.InputLen, d.OutputLen, d.InputLen+d.OutputLen, positions)}
	}
	lens := make([]int, len(d.rows))
	p := b.progress("tokenizing " + d.source())
	p.count = func(done, total int64) string { return fmt.Sprintf("%d/%d lines", done, total) }
	err := b.each(len(lens), func(done int) { p.update(int64(done), int64(len(lens))) }, func(i int) {
		lens[i] = len(voc.codec.Encode(d.rows[i].prompt))
	})
	if err != nil {
		return nil, err
	}
	p.done()
	sum := 0
	for _, l := range lens {
		sum += l
	}
	if sum == 0 {
		return nil, &ConfigError{msg: d.source() + ": the lines encode to no tokens"}
	}
	avg := float64(sum) / float64(len(lens))
	base := len(voc.codec.Encode(sonnetBase))
	if d.InputLen <= base {
		return nil, &ConfigError{msg: fmt.Sprintf("--sonnet-input-len %d must be more than the base prompt's %d tokens", d.InputLen, base)}
	}
	inputLines := max(int(math.RoundToEven(float64(d.InputLen-base)/avg)), 1)
	prefixLines := min(max(int(math.RoundToEven(float64(d.PrefixLen-base)/avg)), 0), len(d.rows))
	drawn := max(inputLines-prefixLines, 0)
	var fixed strings.Builder
	fixed.WriteString(sonnetBase)
	for _, r := range d.rows[:prefixLines] {
		fixed.WriteString(r.prompt)
	}
	if l := len(voc.codec.Encode(fixed.String())); l > d.InputLen {
		return nil, &ConfigError{msg: fmt.Sprintf("--sonnet-prefix-len %d puts the file's first %d lines before the drawn ones: %d tokens with the base prompt, more than --sonnet-input-len %d", d.PrefixLen, prefixLines, l, d.InputLen)}
	}
	rng := rand.New(rand.NewPCG(d.Seed, 0x5077e7))
	var out []sampled
	for draws := 0; len(out) < n; {
		if draws >= maxSonnetDraws*(len(out)+1) {
			return nil, &ConfigError{msg: fmt.Sprintf("%s: %d draws of %d lines gave %d of %d prompts within --sonnet-input-len %d: give a longer one", d.source(), draws, drawn, len(out), n, d.InputLen)}
		}
		texts := make([]string, min(max(n-len(out), 64), 4096)) // bounds the texts held at once
		for k := range texts {
			var t strings.Builder
			t.WriteString(fixed.String())
			for range drawn {
				t.WriteString(d.rows[rng.IntN(len(d.rows))].prompt)
			}
			texts[k] = t.String()
		}
		draws += len(texts)
		enc := make([]sampled, len(texts))
		if err := b.each(len(texts), nil, func(k int) { enc[k] = sampled{tokens: voc.codec.Encode(texts[k]), text: texts[k], maxNew: d.OutputLen} }); err != nil {
			return nil, err
		}
		for _, e := range enc {
			if len(out) < n && len(e.tokens) <= d.InputLen {
				out = append(out, e)
			}
		}
	}
	return out, nil
}
