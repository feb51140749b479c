package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// burstSample is BurstGPT's CSV as its files have it, with a row of each kind vLLM drops.
const burstSample = `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
45,GPT-4,1087,0,1087,Conversation log
118,GPT-4,417,276,693,API log
120,GPT-4,30,-1,29,API log
131,ChatGPT,oops,5,,Conversation log
140,GPT-4,12,34,46,Conversation log
`

func TestParseBurstGPT(t *testing.T) {
	cases := []struct {
		name, in string
		rows     []burstRow
		err      string
	}{
		{"vLLM's rows: GPT-4 with Response tokens above 0", burstSample, []burstRow{{417, 276, 4}, {12, 34, 7}}, ""},
		{"columns found by name, a byte order mark, CRLF", "\ufeffModel,Response tokens,Request tokens\r\nGPT-4,5,9\r\n", []burstRow{{9, 5, 2}}, ""},
		{"empty", "", nil, "empty file: want BurstGPT's CSV with the header Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"},
		{"no Response tokens column", "Timestamp,Model,Request tokens,Output tokens\n1,GPT-4,3,4\n", nil, `no "Response tokens" column: want BurstGPT's header`},
		{"a fractional length", "Model,Request tokens,Response tokens\nGPT-4,3,4\nGPT-4,3,12.5\n", nil, `line 3: "Response tokens" is "12.5", want an integer`},
		{"a kept row's prompt not a number", "Model,Request tokens,Response tokens\nGPT-4,x,4\n", nil, `line 2: "Request tokens" is "x", want an integer from 0 to 16777216`},
		{"a negative prompt", "Model,Request tokens,Response tokens\nGPT-4,-3,4\n", nil, `line 2: "Request tokens" is "-3", want an integer from 0`},
		{"an output past any context", "Model,Request tokens,Response tokens\nGPT-4,3,99999999999\n", nil, `line 2: "Response tokens" is 99999999999, want at most 16777216`},
		{"a short row", "Model,Request tokens,Response tokens\nGPT-4,3,4\nGPT-4,3\n", nil, "not BurstGPT CSV (line 3: wrong number of fields): want rows of 3 fields, as the header"},
		{"a bad quote", "Model,Request tokens,Response tokens\nGPT-4,\"3,4\n", nil, "not BurstGPT CSV (line 2: "},
		{"no GPT-4 row", "Model,Request tokens,Response tokens\nChatGPT,3,4\nGPT-4,3,0\n", nil, `no row has Model "GPT-4" and Response tokens above 0`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows, err := parseBurstGPT(t.Context(), strings.NewReader(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rows, c.rows) {
				t.Errorf("rows %v, want %v", rows, c.rows)
			}
		})
	}
}

// A line longer than maxLineBytes ends the read, before the CSV reader holds all of it.
func TestParseBurstGPTLongLine(t *testing.T) {
	in := "Model,Request tokens,Response tokens\nGPT-4,3," + strings.Repeat("9", maxLineBytes+10) + "\n"
	if _, err := parseBurstGPT(t.Context(), strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), "a line is longer than 16777216 bytes") {
		t.Errorf("err %v, want the long line named", err)
	}
}

// burstFile writes a trace of GPT-4 rows whose Request tokens are 10, 11, ... (each row known by
// its prompt length), with the given Response tokens.
func burstFile(t *testing.T, outs ...int) string {
	var b strings.Builder
	b.WriteString("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
	for i, out := range outs {
		fmt.Fprintf(&b, "%d,GPT-4,%d,%d,%d,Conversation log\n", i, 10+i, out, 10+i+out)
	}
	return writeTemp(t, "burst.csv", b.String())
}

// TestSampleBurstGPT: n rows drawn without replacement when the trace has n that fit, with
// replacement when not; each prompt has exactly its row's Request tokens and the output its
// Response tokens; rows the model cannot hold are never drawn; the seed decides.
func TestSampleBurstGPT(t *testing.T) {
	outs := make([]int, 30)
	for i := range outs {
		outs[i] = 5 + i
	}
	outs[29] = 2000 // prompt 39 + output 2000: more than 1024 positions
	d, err := LoadDataset(t.Context(), "burstgpt", burstFile(t, outs...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.validate(10); err != nil {
		t.Fatal(err)
	}
	m := gpt2Model(t, 1024)
	rs, err := d.sample(testBuild(3), 29, m)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for i, r := range rs {
		in := len(r.tokens)
		if in < 10 || in > 38 || r.maxNew != outs[in-10] || !slices.Equal(m.Codec.Encode(r.text), r.tokens) {
			t.Fatalf("request %d: %d prompt tokens, output %d; want a row's Request tokens (10..38, the row of 39 does not fit) and its Response tokens %v", i, in, r.maxNew, outs)
		}
		seen[in] = true
	}
	if len(seen) != 29 {
		t.Errorf("29 requests from %d distinct rows, want every one of the 29 that fit once", len(seen))
	}
	again, _ := d.sample(testBuild(1), 29, m)
	for i := range rs {
		if rs[i].text != again[i].text || rs[i].maxNew != again[i].maxNew {
			t.Fatalf("request %d differs between two samples with one seed (3 and 1 workers)", i)
		}
	}
	d.Seed = 9
	if other, _ := d.sample(testBuild(3), 29, m); slices.EqualFunc(rs, other, func(a, b sampled) bool { return a.maxNew == b.maxNew }) {
		t.Error("seeds 0 and 9 drew the rows in the same order")
	}
	// 200 requests of 29 rows: each row drawn again, about as often (binomial(200, 1/29): mean 6.9).
	many, err := d.sample(testBuild(3), 200, m)
	if err != nil {
		t.Fatal(err)
	}
	count := map[int]int{}
	for _, r := range many {
		count[len(r.tokens)]++
	}
	if len(count) < 27 || count[39] != 0 {
		t.Errorf("200 draws of 29 rows reached %d of them (%v), want nearly all and never the row that does not fit", len(count), count)
	}
	if _, err := d.sample(testBuild(1), 2, gpt2Model(t, 12)); err == nil || !strings.Contains(err.Error(), "no GPT-4 row fits the model") {
		t.Errorf("12 positions: %v, want no row fits", err)
	}
}

// A kept row with Request tokens 0 (an empty prompt, which vLLM would send) is left out as one
// that does not fit.
func TestSampleBurstGPTEmptyPrompt(t *testing.T) {
	path := writeTemp(t, "b.csv", "Model,Request tokens,Response tokens\nGPT-4,0,5\nGPT-4,7,3\n")
	d, err := LoadDataset(t.Context(), "burstgpt", path, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := d.sample(testBuild(1), 4, gpt2Model(t, 1024))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if len(r.tokens) != 7 || r.maxNew != 3 {
			t.Errorf("a request of %d tokens, output %d: want only the row of 7 and 3", len(r.tokens), r.maxNew)
		}
	}
}

func TestLoadBurstGPTErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.csv")
	_, err := LoadDataset(t.Context(), "burstgpt", missing, io.Discard)
	if err == nil || !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "--dataset burstgpt --dataset-path "+missing+": no such file or directory") {
		t.Errorf("missing file: %v", err)
	}
	bad := writeTemp(t, "bad.csv", "Model,Request tokens,Response tokens\nGPT-4,3,four\n")
	_, err = LoadDataset(t.Context(), "burstgpt", bad, io.Discard)
	if want := "--dataset burstgpt --dataset-path " + bad + `: line 2: "Response tokens" is "four", want an integer`; err == nil || err.Error() != want {
		t.Errorf("bad row: %v, want %q", err, want)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if d, err := LoadDataset(ctx, "burstgpt", writeTemp(t, "ok.csv", burstSample), io.Discard); d != nil || !errors.Is(err, context.Canceled) || errors.Is(err, ErrBadConfig) {
		t.Errorf("cancelled: %v, %v; want context.Canceled alone", d, err)
	}
}

func FuzzParseBurstGPT(f *testing.F) {
	for _, s := range []string{burstSample, "", "Model,Request tokens,Response tokens\nGPT-4,1,1\n", "a,b\n\"", "Model,Request tokens,Response tokens\nGPT-4,-1,2\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rows, err := parseBurstGPT(t.Context(), strings.NewReader(s))
		if err != nil {
			return
		}
		if len(rows) == 0 {
			t.Fatal("no error and no rows")
		}
		for _, r := range rows {
			if r.in < 0 || r.out < 1 || r.in > maxRequestTokens || r.out > maxRequestTokens {
				t.Fatalf("accepted row %+v", r)
			}
		}
	})
}

// A slow read of a BurstGPT trace notes its progress in the file's bytes, as the other files'.
func TestLoadBurstGPTNotesASlowRead(t *testing.T) {
	var b strings.Builder
	b.WriteString("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
	for i := 0; b.Len() < 3<<20; i++ {
		fmt.Fprintf(&b, "%d,GPT-4,%d,%d,0,Conversation log\n", i, 1+i%500, 1+i%300)
	}
	path := writeTemp(t, "big.csv", b.String())
	var notes strings.Builder
	d := &Dataset{Kind: "burstgpt", Path: path}
	err := d.read(build{ctx: t.Context(), workers: 1, clock: tickingClock{newFakeClock(0)}, notes: &notes}, func(ctx context.Context, r io.Reader) (err error) {
		d.burst, err = parseBurstGPT(ctx, r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"rosetop: reading --dataset burstgpt --dataset-path " + path + ": ", " MB, about ", ": done in "} {
		if !strings.Contains(notes.String(), w) {
			t.Errorf("notes %q, want %q in them", notes.String(), w)
		}
	}
	if len(d.burst) < 50000 {
		t.Errorf("%d rows kept of a 3 MB trace", len(d.burst))
	}
}
