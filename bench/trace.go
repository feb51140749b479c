package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"time"
)

// Traces are JSONL in the Mooncake shape (kvcache-ai/Mooncake, FAST25-release/README.md), which
// AIPerf, vLLM and GuideLLM replay: one request a line,
//
//	{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 2353]}
//
// timestamp: arrival in ms after the trace's start; input_length, output_length: tokens;
// hash_ids: the prompt's blocks of traceBlock tokens, equal ids meaning equal blocks (a shared
// prefix). Written timestamps are whole milliseconds, as the Mooncake traces and AIPerf's loader
// have them.

// traceBlock is the tokens one hash id stands for (Mooncake's block size).
const traceBlock = 512

// traceLine is one line of a trace file.
type traceLine struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []int64  `json:"hash_ids"`
}

// LoadTrace reads a Mooncake-shaped trace for --replay and checks it, noting a slow read's
// progress on notes. Errors name the file, the line and what was expected, and wrap
// ErrBadConfig, except ctx's (a signal stopped the read), which come back as they are.
func LoadTrace(ctx context.Context, path string, notes io.Writer) (*Dataset, error) {
	d := &Dataset{Kind: "trace", Path: path}
	if err := d.load(newBuild(ctx, NewRealClock(), notes), parseTrace); err != nil {
		return nil, err
	}
	return d, nil
}

// parseTrace reads trace lines; timestamps must not decrease.
func parseTrace(ctx context.Context, r io.Reader) ([]datasetRow, error) {
	const want = `{"timestamp": MS, "input_length": N, "output_length": N, "hash_ids": [...]}`
	var rows []datasetRow
	err := eachLine(ctx, r, func(n int, line []byte) error {
		var t traceLine
		if err := json.Unmarshal(line, &t); err != nil {
			return fmt.Errorf("line %d: not a trace line %s (%s)", n, want, jsonProblem(err))
		}
		switch {
		case t.Timestamp == nil && t.InputLength == nil && t.OutputLength == nil:
			return fmt.Errorf("line %d: not a trace line %s", n, want)
		case t.Timestamp == nil || !(*t.Timestamp >= 0) || math.IsInf(*t.Timestamp, 0) || *t.Timestamp > maxTraceMs:
			return fmt.Errorf("line %d: \"timestamp\" must be a number of ms from 0 to %d", n, maxTraceMs)
		case t.InputLength == nil || *t.InputLength < 1 || *t.InputLength > maxRequestTokens:
			return fmt.Errorf("line %d: \"input_length\" must be an integer from 1 to %d", n, maxRequestTokens)
		case t.OutputLength == nil || *t.OutputLength < 1 || *t.OutputLength > maxRequestTokens:
			return fmt.Errorf("line %d: \"output_length\" must be an integer from 1 to %d", n, maxRequestTokens)
		case len(rows) > 0 && *t.Timestamp < rows[len(rows)-1].atMs:
			return fmt.Errorf("line %d: timestamp %g is before the previous line's %g (a trace is in arrival order)", n, *t.Timestamp, rows[len(rows)-1].atMs)
		case len(rows) >= maxDatasetRows:
			return fmt.Errorf("more than %d lines: split the file", maxDatasetRows)
		}
		rows = append(rows, datasetRow{atMs: *t.Timestamp, inputLen: *t.InputLength, outputLen: *t.OutputLength, hashIDs: t.HashIDs, line: n})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, errors.New("no lines: want one " + want + " per line")
	}
	return rows, nil
}

// maxTraceMs bounds a trace's timestamps (30 days), so offsets fit a time.Duration with room.
const maxTraceMs = 30 * 24 * 3600 * 1000

// Len is how many requests the dataset's file holds (0 for random).
func (d *Dataset) Len() int { return len(d.rows) }

// Offsets are a trace's arrivals after its first, for n requests at speed (2: twice as fast).
func (d *Dataset) Offsets(n int, speed float64) []time.Duration {
	n = min(n, len(d.rows))
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration((d.rows[i].atMs - d.rows[0].atMs) / speed * float64(time.Millisecond))
	}
	return out
}

// sampleTrace makes the trace's first n requests: prompts of input_length tokens whose blocks
// follow the hash ids (one block of random tokens per distinct id, so requests that share ids
// share a prefix), output_length tokens each. The blocks are made first; then each prompt is
// fitted on the build's workers from a stream of its own.
func (d *Dataset) sampleTrace(b build, n, positions int, voc vocab) ([]sampled, error) {
	rows := d.rows[:min(n, len(d.rows))]
	blocks := map[int64][]int32{} // read-only once made
	for i := range rows {
		row := &rows[i]
		if row.inputLen+row.outputLen > positions {
			return nil, &ConfigError{msg: fmt.Sprintf("%s: line %d: input_length %d + output_length %d is more than the model's %d positions", d.source(), row.line, row.inputLen, row.outputLen, positions)}
		}
		for k, id := range row.hashIDs {
			if _, ok := blocks[id]; ok || k*traceBlock >= row.inputLen {
				continue
			}
			rng := rand.New(rand.NewPCG(d.Seed^0x7ace, uint64(id)))
			blk := make([]int32, traceBlock)
			for j := range blk {
				blk[j] = voc.allowed[rng.IntN(len(voc.allowed))]
			}
			blocks[id] = blk
		}
	}
	out := make([]sampled, len(rows))
	p := b.progress(fmt.Sprintf("building %d prompts (%s)", len(rows), d.source()))
	err := b.each(len(rows), func(done int) { p.update(int64(done), int64(len(rows))) }, func(i int) {
		row := &rows[i]
		rng := rand.New(rand.NewPCG(d.Seed, uint64(i)))
		ids := make([]int32, 0, row.inputLen)
		for k := 0; len(ids) < row.inputLen; k++ {
			if k < len(row.hashIDs) {
				ids = append(ids, blocks[row.hashIDs[k]]...)
			} else {
				ids = append(ids, voc.allowed[rng.IntN(len(voc.allowed))])
			}
		}
		text, ids := voc.fitLength(ids[:row.inputLen], row.inputLen, rng)
		out[i] = sampled{tokens: ids, text: text, maxNew: row.outputLen}
	})
	if err != nil {
		return nil, err
	}
	p.done()
	return out, nil
}

// traceRecord is one request of a run as a trace line: its arrival, lengths and prompt ids.
type traceRecord struct {
	at        time.Duration // submit start on the session clock
	input     []int32
	outputLen int
}

// writeTrace writes recs (in submission order) as a Mooncake trace: timestamps in whole ms after
// the first arrival, hash ids numbered from 0 in the order blocks first appear.
func writeTrace(w io.Writer, recs []traceRecord) error {
	ids := map[uint64]int64{}
	enc := json.NewEncoder(w)
	for _, r := range recs {
		ts := math.Round(ms(r.at - recs[0].at))
		hashes := blockHashes(r.input)
		line := struct {
			Timestamp    int64   `json:"timestamp"`
			InputLength  int     `json:"input_length"`
			OutputLength int     `json:"output_length"`
			HashIDs      []int64 `json:"hash_ids"`
		}{Timestamp: int64(ts), InputLength: len(r.input), OutputLength: r.outputLen, HashIDs: make([]int64, len(hashes))}
		for k, h := range hashes {
			id, ok := ids[h]
			if !ok {
				id = int64(len(ids))
				ids[h] = id
			}
			line.HashIDs[k] = id
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return nil
}

// blockHashes hashes ids in blocks of traceBlock tokens (the last may be shorter), each hash
// chained on the one before, so that equal hashes mean equal prefixes.
func blockHashes(ids []int32) []uint64 {
	var out []uint64
	var prev uint64
	var buf [4]byte
	for start := 0; start < len(ids); start += traceBlock {
		h := fnv.New64a()
		var pb [8]byte
		binary.LittleEndian.PutUint64(pb[:], prev)
		h.Write(pb[:])
		for _, id := range ids[start:min(start+traceBlock, len(ids))] {
			binary.LittleEndian.PutUint32(buf[:], uint32(id))
			h.Write(buf[:])
		}
		prev = h.Sum64()
		out = append(out, prev)
	}
	return out
}

// traceRecords are a run's submitted requests as trace lines: the output length is what a
// completed request produced, else what it asked for.
func traceRecords(wl *workload, reqs []RequestResult) []traceRecord {
	var out []traceRecord
	for i := range reqs {
		r := &reqs[i]
		if r.Record == nil {
			continue
		}
		outLen := wl.maxNewOf(r.Index)
		if r.completed() {
			outLen = len(r.Record.Output)
		}
		out = append(out, traceRecord{at: r.Record.Times.SubmitStart, input: wl.tokens[r.Index], outputLen: outLen})
	}
	return out
}
