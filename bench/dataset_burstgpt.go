package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
)

// BurstGPT's CSV (github.com/HPMLL/BurstGPT) has the header
// Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type. vLLM's BurstGPTDataset
// (vllm/benchmarks/datasets/burstgpt.py) keeps the rows whose Model is "GPT-4" and whose
// Response tokens are above 0 (the others failed), and reads a row's prompt and output lengths
// from its third and fourth columns, Request tokens and Response tokens; here they are found by
// their names.
const (
	burstHeader   = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"
	burstModel    = "GPT-4"
	maxBurstRows  = 1 << 23 // kept rows: BurstGPT's largest file has 3.9M lines
	burstModelCol = "Model"
	burstInCol    = "Request tokens"
	burstOutCol   = "Response tokens"
)

// burstRow is a BurstGPT row vLLM keeps: its lengths, and its line for errors.
type burstRow struct {
	in, out int32
	line    int64
}

// parseBurstGPT reads a BurstGPT CSV trace a record at a time (a cancelled ctx stops it between
// two), keeping vLLM's rows. Every GPT-4 row's Response tokens must be an integer (vLLM compares
// it with 0), every kept row's Request tokens one from 0 up.
func parseBurstGPT(ctx context.Context, r io.Reader) ([]burstRow, error) {
	cr := csv.NewReader(&lineCap{r: r})
	cr.ReuseRecord = true
	header, err := cr.Read()
	switch {
	case err == io.EOF:
		return nil, fmt.Errorf("empty file: want BurstGPT's CSV with the header %s", burstHeader)
	case err != nil:
		return nil, fmt.Errorf("not BurstGPT CSV (%s): want the header %s", csvProblem(err), burstHeader)
	}
	col := map[string]int{}
	for i, name := range header {
		if i == 0 {
			name = strings.TrimPrefix(name, "\ufeff") // a byte order mark, as spreadsheets write it
		}
		if _, ok := col[strings.TrimSpace(name)]; !ok {
			col[strings.TrimSpace(name)] = i
		}
	}
	for _, name := range []string{burstModelCol, burstInCol, burstOutCol} {
		if _, ok := col[name]; !ok {
			return nil, fmt.Errorf("no %q column: want BurstGPT's header %s", name, burstHeader)
		}
	}
	model, in, out := col[burstModelCol], col[burstInCol], col[burstOutCol]
	var rows []burstRow
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not BurstGPT CSV (%s): want rows of %d fields, as the header", csvProblem(err), len(header))
		}
		line, _ := cr.FieldPos(0)
		if rec[model] != burstModel {
			continue
		}
		outLen, err := strconv.Atoi(strings.TrimSpace(rec[out]))
		switch {
		case err != nil:
			return nil, fmt.Errorf("line %d: %q is %q, want an integer", line, burstOutCol, rec[out])
		case outLen <= 0: // a failed request: vLLM leaves it out
			continue
		case outLen > maxRequestTokens:
			return nil, fmt.Errorf("line %d: %q is %d, want at most %d", line, burstOutCol, outLen, maxRequestTokens)
		}
		inLen, err := strconv.Atoi(strings.TrimSpace(rec[in]))
		switch {
		case err != nil || inLen < 0 || inLen > maxRequestTokens:
			return nil, fmt.Errorf("line %d: %q is %q, want an integer from 0 to %d", line, burstInCol, rec[in], maxRequestTokens)
		case len(rows) >= maxBurstRows:
			return nil, fmt.Errorf("more than %d %s rows: split the file", maxBurstRows, burstModel)
		}
		rows = append(rows, burstRow{in: int32(inLen), out: int32(outLen), line: int64(line)})
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no row has %s %q and %s above 0 (the rows vLLM's BurstGPT dataset keeps)", burstModelCol, burstModel, burstOutCol)
	}
	return rows, nil
}

// csvProblem is a CSV reading error without encoding/csv's wording of where (it names the line).
func csvProblem(err error) string {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Sprintf("line %d: %v", pe.Line, pe.Err)
	}
	return err.Error()
}

// errLineTooLong ends the read of a CSV file with a line longer than maxLineBytes.
var errLineTooLong = fmt.Errorf("a line is longer than %d bytes", maxLineBytes)

// lineCap passes a reader's bytes on until a line runs past maxLineBytes, then fails: the CSV
// reader would otherwise hold a line of any length.
type lineCap struct {
	r   io.Reader
	run int // bytes since the last newline
}

func (c *lineCap) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	for rest := p[:n]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			c.run += len(rest)
			break
		}
		c.run += i
		if c.run > maxLineBytes {
			break
		}
		c.run, rest = 0, rest[i+1:]
	}
	if c.run > maxLineBytes {
		return 0, errLineTooLong
	}
	return n, err
}

// sampleBurstGPT is vLLM's BurstGPT dataset: n of the kept rows are drawn, without replacement
// when there are that many, else with (pandas' DataFrame.sample, seeded), and request i's prompt
// is consecutive vocabulary ids from i (vLLM's (i + j) % vocab_size), fitted to the row's Request
// tokens, its output the row's Response tokens. Rows the model cannot hold (an empty prompt, or
// prompt + output beyond its positions) are left out first, as the other file datasets leave
// them; vLLM sends them. Where vLLM decodes the ids and counts the prompt as Request tokens
// whatever they re-encode to, the prompt here has that many tokens. Each prompt is fitted on
// the build's workers from a stream of its own.
func (d *Dataset) sampleBurstGPT(b build, n, positions int, voc vocab) ([]sampled, error) {
	var fit []int32 // indexes of the rows that fit
	for i, r := range d.burst {
		if r.in >= 1 && int(r.in)+int(r.out) <= positions {
			fit = append(fit, int32(i))
		}
	}
	if len(fit) == 0 {
		return nil, &ConfigError{msg: fmt.Sprintf("%s: no %s row fits the model (a prompt of at least 1 token, and prompt + output within %d positions)", d.source(), burstModel, positions)}
	}
	rng := rand.New(rand.NewPCG(d.Seed, 0xb0257))
	rows := make([]burstRow, n)
	for i := range rows {
		if n <= len(fit) { // a partial Fisher-Yates shuffle: the first n of a random order
			j := i + rng.IntN(len(fit)-i)
			fit[i], fit[j] = fit[j], fit[i]
			rows[i] = d.burst[fit[i]]
		} else {
			rows[i] = d.burst[fit[rng.IntN(len(fit))]]
		}
	}
	out := make([]sampled, n)
	p := b.progress(fmt.Sprintf("building %d prompts (%s)", n, d.source()))
	err := b.each(n, func(done int) { p.update(int64(done), int64(n)) }, func(i int) {
		ids := make([]int32, rows[i].in)
		for j := range ids {
			ids[j] = voc.allowed[(i+j)%len(voc.allowed)]
		}
		out[i].text, out[i].tokens = voc.fitLength(ids, int(rows[i].in), rand.New(rand.NewPCG(d.Seed^0xb0257, uint64(i))))
		out[i].maxNew = int(rows[i].out)
	})
	if err != nil {
		return nil, err
	}
	p.done()
	return out, nil
}
