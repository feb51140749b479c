package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"unicode/utf8"

	"rosetop/internal/jsonkind"
	"rosetop/internal/regular"
)

// Dataset is where a workload's requests come from instead of the prompt flags, as vLLM's bench
// datasets make them: synthesized (random, prefix_repetition), read from a file (sharegpt, jsonl,
// custom, burstgpt, sonnet) or a replayed Mooncake trace (trace.go). LoadDataset and LoadTrace
// read a file and check its format before any model is loaded; the session counts lengths with
// the model's tokenizer when it builds its workload.
type Dataset struct {
	Kind string // one of DatasetKinds, or "trace"
	Path string // the file (the kinds that read one)
	// InputLen is random's mean sampled prompt tokens, sonnet's most prompt tokens.
	InputLen int
	// OutputLen is random's mean output tokens; sonnet's and prefix_repetition's for every request;
	// sharegpt's, jsonl's and custom's for every request, 0 for each row's own.
	OutputLen  int
	RangeRatio float64 // random: lengths uniform in [len*(1-r), len*(1+r)], 0 <= r < 1
	// PrefixLen is the tokens of a prefix shared by requests: random's before every prompt,
	// prefix_repetition's each, sonnet's (base prompt and the file's first lines) before every prompt.
	PrefixLen   int
	SuffixLen   int    // prefix_repetition: tokens after the prefix, each request's own
	NumPrefixes int    // prefix_repetition: distinct prefixes
	Seed        uint64 // the sample, and the synthesized prompts' tokens
	// rows are the file's usable rows, in file order (sonnet: its lines); read-only after loading.
	rows []datasetRow
	// burst are a BurstGPT trace's kept rows, held compactly: a trace has millions.
	burst []burstRow
}

// datasetRow is one request shape read from a file.
type datasetRow struct {
	prompt     string  // sharegpt, jsonl, custom: the prompt text; sonnet: the line, with its newline
	completion string  // sharegpt: the reply, whose token count is the output length
	outputLen  int     // jsonl, custom, trace: output tokens (jsonl, custom: 0 when the line has none)
	inputLen   int     // trace: prompt tokens to synthesize
	hashIDs    []int64 // trace: ids of the prompt's 512-token blocks; equal ids, equal blocks
	atMs       float64 // trace: arrival, ms after the trace's start
	line       int     // 1-based line (jsonl, custom, sonnet, trace) or entry (sharegpt), for errors
}

// DatasetKinds are the names --dataset takes.
var DatasetKinds = []string{"random", "sharegpt", "jsonl", "custom", "burstgpt", "sonnet", "prefix_repetition"}

// fileKinds are the kinds that read --dataset-path, with the parser of each (burstgpt has its own
// loader: its rows are held compactly).
var fileKinds = map[string]func(context.Context, io.Reader) ([]datasetRow, error){
	"sharegpt": parseShareGPT, "jsonl": parseJSONL, "custom": parseCustom, "sonnet": parseSonnet, "burstgpt": nil,
}

// FileDatasetKinds are the kinds of --dataset that read --dataset-path, in DatasetKinds' order.
func FileDatasetKinds() []string {
	var out []string
	for _, k := range DatasetKinds {
		if _, ok := fileKinds[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

// Bounds on what a dataset file may hold, so that no file sizes an allocation unchecked.
const (
	maxLineBytes   = 16 << 20 // one JSONL line
	maxDatasetRows = 1 << 20  // rows kept from one file
	// maxRequestTokens bounds a request's prompt and output lengths, more than any model's
	// context: a length sizes the prompt built for it.
	maxRequestTokens = 1 << 24
)

// source names the dataset as the command line gave it, for errors.
func (d *Dataset) source() string {
	switch d.Kind {
	case "random", "prefix_repetition":
		return "--dataset " + d.Kind
	case "trace":
		return "--replay " + d.Path
	}
	return fmt.Sprintf("--dataset %s --dataset-path %s", d.Kind, d.Path)
}

// validate checks the settings for a run of n requests; nil (no dataset) is valid.
func (d *Dataset) validate(n int) error {
	if d == nil {
		return nil
	}
	bad := func(format string, args ...any) error { return &ConfigError{msg: fmt.Sprintf(format, args...)} }
	switch d.Kind {
	case "random":
		if _, _, _, _, err := d.randomBounds(); err != nil {
			return err
		}
	case "prefix_repetition":
		return d.validatePrefixRepetition(n)
	case "sonnet":
		return d.validateSonnet()
	case "burstgpt":
		if len(d.burst) == 0 {
			return bad("%s: no rows loaded", d.source())
		}
	case "sharegpt", "jsonl", "custom", "trace":
		if len(d.rows) == 0 {
			return bad("%s: no rows loaded", d.source())
		}
		if d.OutputLen < 0 || d.OutputLen > maxRequestTokens {
			return bad("--output-len must be from 0 to %d, got %d", maxRequestTokens, d.OutputLen)
		}
		if (d.Kind == "jsonl" || d.Kind == "custom") && d.OutputLen == 0 {
			field, flag := "output_len", "--output-len"
			if d.Kind == "custom" {
				field, flag = "output_tokens", "--custom-output-len" // vLLM's custom.py: output_tokens when --custom-output-len is -1
			}
			for _, r := range d.rows {
				if r.outputLen == 0 {
					return bad("%s: line %d has no %q: give %s N for the lines without one", d.source(), r.line, field, flag)
				}
			}
		}
		if d.Kind == "trace" && n > len(d.rows) {
			return bad("%s: --num-requests %d is more than the trace's %d requests", d.source(), n, len(d.rows))
		}
	default:
		return bad("--dataset: unknown dataset %q (valid: %s)", d.Kind, strings.Join(DatasetKinds, ", "))
	}
	return nil
}

// LoadDataset reads the file of a file kind (FileDatasetKinds) and checks its format, noting a
// slow read's progress on notes. Errors name the file and what was expected and wrap
// ErrBadConfig, except ctx's (a signal stopped the read), which come back as they are.
func LoadDataset(ctx context.Context, kind, path string, notes io.Writer) (*Dataset, error) {
	d := &Dataset{Kind: kind, Path: path}
	parse, ok := fileKinds[kind]
	if !ok {
		return nil, &ConfigError{msg: fmt.Sprintf("--dataset: %q is not a file dataset (valid: %s)", kind, strings.Join(FileDatasetKinds(), ", "))}
	}
	b := newBuild(ctx, NewRealClock(), notes)
	var err error
	if kind == "burstgpt" {
		err = d.read(b, func(ctx context.Context, r io.Reader) (err error) {
			d.burst, err = parseBurstGPT(ctx, r)
			return err
		})
	} else {
		err = d.load(b, parse)
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

// load reads the dataset's file into its rows with parse, noting a slow read's progress; errors
// as LoadDataset's.
func (d *Dataset) load(b build, parse func(context.Context, io.Reader) ([]datasetRow, error)) error {
	return d.read(b, func(ctx context.Context, r io.Reader) (err error) {
		d.rows, err = parse(ctx, r)
		return err
	})
}

// read opens the dataset's file and hands it to parse, noting a slow read's progress in the
// file's bytes; errors as LoadDataset's.
func (d *Dataset) read(b build, parse func(context.Context, io.Reader) error) error {
	err := readFile(b, d.Path, d.source(), parse)
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return err
	case err != nil:
		return &ConfigError{msg: fmt.Sprintf("%s: %v", d.source(), err)}
	}
	return nil
}

// readFile opens path and parses it, noting the progress of a slow read of what (the file as
// the command line names it) in the file's bytes.
func readFile(b build, path, what string, parse func(context.Context, io.Reader) error) error {
	if path == "" {
		return errors.New("no file given")
	}
	f, size, err := regular.Open(path) // a FIFO or a device would block or never end
	if err != nil {
		return err
	}
	defer f.Close()
	p := b.progress("reading " + what)
	p.count = func(done, total int64) string {
		return fmt.Sprintf("%.0f/%.0f MB", float64(done)/1e6, float64(total)/1e6)
	}
	if err := parse(b.ctx, bufio.NewReaderSize(&progressReader{r: f, p: p, size: size}, 1<<16)); err != nil {
		return err
	}
	p.done()
	return nil
}

// progressReader notes a read's progress as its bytes pass; used by the reading goroutine.
type progressReader struct {
	r    io.Reader
	p    *progress
	read int64
	size int64
}

func (r *progressReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.read += int64(n)
	r.p.update(r.read, r.size)
	return n, err
}

// parseShareGPT reads the ShareGPT JSON format (as vLLM's ShareGPTDataset reads it,
// vllm/benchmarks/datasets/sharegpt.py): an array of entries whose "conversations" list turns
// {"from", "value"}. A row is an entry's first human turn ("human" or "user"; the first turn
// when no turn says who spoke) and the turn after it, the reply. The array is decoded an entry
// at a time; a cancelled ctx stops it between two.
func parseShareGPT(ctx context.Context, r io.Reader) ([]datasetRow, error) {
	const want = `a JSON array of {"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}]}`
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return nil, fmt.Errorf("not ShareGPT JSON: want %s", want)
	}
	type turn struct {
		Value string `json:"value"` // "from" is not read: vLLM takes the first two turns whoever spoke
	}
	var rows []datasetRow
	for n := 1; dec.More(); n++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var e struct {
			Conversations []turn `json:"conversations"`
		}
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("entry %d: not ShareGPT JSON (%s): want %s", n, jsonProblem(err), want)
		}
		if c := e.Conversations; len(c) >= 2 { // vLLM's ShareGPTDataset: the first two turns, whoever spoke
			rows = append(rows, datasetRow{prompt: c[0].Value, completion: c[1].Value, line: n})
		}
		if len(rows) > maxDatasetRows {
			return nil, fmt.Errorf("more than %d conversations: split the file", maxDatasetRows)
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("not ShareGPT JSON (%s): want %s", jsonProblem(err), want)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("not ShareGPT JSON (text after the array's closing ]): want %s", want)
	}
	if len(rows) == 0 {
		return nil, errors.New("no conversation has a human turn followed by a reply")
	}
	return rows, nil
}

// eachLine calls f with every non-blank line (1-based numbers), each at most maxLineBytes; a
// cancelled ctx stops it between two lines.
func eachLine(ctx context.Context, r io.Reader, f func(n int, line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), maxLineBytes)
	for n := 1; sc.Scan(); n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		if err := f(n, line); err != nil {
			return err
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return fmt.Errorf("a line is longer than %d bytes", maxLineBytes)
	}
	return sc.Err()
}

// sampled is one request of a dataset workload: its prompt ids, its text (which encodes back to
// the ids) and its output length.
type sampled struct {
	tokens []int32
	text   string
	maxNew int
}

// sample makes n requests that fit the model (prompt + output <= its positions).
func (d *Dataset) sample(b build, n int, model ModelInfo) ([]sampled, error) {
	voc := newVocab(model)
	if len(voc.allowed) == 0 {
		return nil, &ConfigError{msg: d.source() + ": the tokenizer has no plain tokens to build prompts from"}
	}
	switch d.Kind {
	case "random":
		return d.sampleRandom(b, n, model.MaxPositions, voc)
	case "prefix_repetition":
		return d.samplePrefixRepetition(b, n, model.MaxPositions, voc)
	case "burstgpt":
		return d.sampleBurstGPT(b, n, model.MaxPositions, voc)
	case "sonnet":
		return d.sampleSonnet(b, n, model.MaxPositions, voc)
	case "trace":
		return d.sampleTrace(b, n, model.MaxPositions, voc)
	}
	return d.sampleText(b, n, model.MaxPositions, voc)
}

// vLLM's is_valid_sequence bounds on a ShareGPT row: its prompt, and its prompt plus output.
const (
	shareGPTMaxPrompt = 1024
	shareGPTMaxTotal  = 2048
)

// sampleText samples sharegpt, jsonl and custom rows: shuffled with the seed (as vLLM does), each kept
// when it fits (ShareGPT as vLLM's is_valid_sequence filters it: a prompt of 4 to 1024 tokens, a
// reply of at least 4 unless --output-len sets it, prompt + output at most 2048; and prompt +
// output within the model's positions); when fewer fit than n, the kept rows are drawn again
// uniformly (vLLM's maybe_oversample_requests).
// Rows are tokenized on the build's workers, as many at a time as are still wanted, and kept in
// the shuffled order: the sample is the same for any number of workers.
func (d *Dataset) sampleText(b build, n, positions int, voc vocab) ([]sampled, error) {
	rng := rand.New(rand.NewPCG(d.Seed, 0x5a3b1e))
	order := rng.Perm(len(d.rows))
	minLen, maxPrompt, maxTotal := 1, math.MaxInt, positions
	if d.Kind == "sharegpt" {
		minLen, maxPrompt, maxTotal = 4, shareGPTMaxPrompt, min(positions, shareGPTMaxTotal)
	}
	want := min(n, len(order)) // rows tokenized at least
	p := b.progress("tokenizing " + d.source())
	p.count = func(done, total int64) string { return fmt.Sprintf("%d/%d rows", done, total) }
	var out []sampled
	for next := 0; len(out) < n && next < len(order); {
		batch := order[next:min(len(order), next+max(n-len(out), 64))]
		enc := make([]sampled, len(batch))
		kept := len(out)
		tick := func(done int) { p.update(int64(min(want, kept+done)), int64(want)) }
		err := b.each(len(batch), tick, func(j int) { enc[j] = d.encodeRow(voc, &d.rows[batch[j]]) })
		if err != nil {
			return nil, err
		}
		for _, e := range enc {
			shortOutput := d.OutputLen == 0 && e.maxNew < minLen // --output-len is never too short
			if len(out) < n && !shortOutput && len(e.tokens) >= minLen && len(e.tokens) <= maxPrompt && len(e.tokens)+e.maxNew <= maxTotal {
				out = append(out, e)
			}
		}
		next += len(batch)
	}
	p.done()
	if len(out) == 0 {
		return nil, &ConfigError{msg: fmt.Sprintf("%s: no row fits the model (a prompt of at least 1 token, 4 to %d for sharegpt, and prompt + output within %d positions)", d.source(), shareGPTMaxPrompt, maxTotal)}
	}
	for kept := len(out); len(out) < n; {
		out = append(out, out[rng.IntN(kept)])
	}
	return out, nil
}

// encodeRow tokenizes a row's prompt and finds its output length: the flags', else the row's
// own (jsonl, custom) or its reply's token count (sharegpt). A custom prompt is sent as written,
// as vLLM's --skip-chat-template sends it (GPT-2 has no chat template; a chat API applies the
// server's own).
func (d *Dataset) encodeRow(voc vocab, row *datasetRow) sampled {
	s := sampled{tokens: voc.codec.Encode(row.prompt), text: row.prompt, maxNew: row.outputLen}
	switch {
	case d.OutputLen > 0:
		s.maxNew = d.OutputLen
	case d.Kind == "sharegpt":
		s.maxNew = len(voc.codec.Encode(row.completion))
	}
	return s
}

// vocab is what synthesized prompts are made of.
type vocab struct {
	codec   TextCodec
	allowed []int32 // ids below the vocabulary size, not EOS, whose bytes are valid UTF-8 on their own
}

func newVocab(m ModelInfo) vocab {
	v := vocab{codec: m.Codec}
	for id := int32(0); int(id) < m.Vocab; id++ {
		if b := m.Codec.TokenBytes(id); id != m.EOS && len(b) > 0 && utf8.Valid(b) && !strings.Contains(string(b), "<|") {
			v.allowed = append(v.allowed, id)
		}
	}
	return v
}

// decode joins the tokens' bytes.
func (v vocab) decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		b.Write(v.codec.TokenBytes(id))
	}
	return b.String()
}

// fitLength turns ids into a text whose encoding has target tokens, as vLLM's
// gen_prompt_decode_to_target_len does: decode, re-encode (merges across token boundaries change
// the count), then cut or extend with random tokens and try again, up to 10 times. It returns the
// text and its encoding, which may miss the target when the tries run out.
func (v vocab) fitLength(ids []int32, target int, rng *rand.Rand) (string, []int32) {
	for try := 0; ; try++ {
		text := v.decode(ids)
		ids = v.codec.Encode(text)
		if len(ids) == target || try == 10 {
			return text, ids
		}
		if len(ids) > target {
			ids = ids[:target]
			continue
		}
		for len(ids) < target {
			ids = append(ids, v.allowed[rng.IntN(len(v.allowed))])
		}
	}
}

// jsonProblem is a JSON decoding error in the file's terms: which member has the wrong kind of
// value (encoding/json names the Go type it was decoding into), else the decoder's message.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err.Error()
	}
	what := "the value"
	if te.Field != "" {
		what = fmt.Sprintf("%q", te.Field)
	}
	return fmt.Sprintf("%s is a JSON %s, want %s", what, te.Value, jsonkind.Name(te.Type, te.Value))
}
