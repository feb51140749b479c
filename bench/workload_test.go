package bench

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// encodeCounter is a TextCodec that counts the texts of more than long bytes it encodes.
type encodeCounter struct {
	TextCodec
	long, n int
}

func (c *encodeCounter) Encode(text string) []int32 {
	if len(text) > c.long {
		c.n++
	}
	return c.TextCodec.Encode(text)
}

// TestUniqueMarkersTooFew: more requests than the vocabulary has marker words is a settings
// error (exit 2), on one line, that names both flags and the limit.
func TestUniqueMarkersTooFew(t *testing.T) {
	m := gpt2Model(t, 1024)
	m.Vocab = 300 // a few merges past the 256 byte tokens: a handful of marker words
	limit := 0
	for ; limit < m.Vocab; limit++ {
		if _, err := UniqueMarkers(m.Codec, limit+1, m.Vocab); err != nil {
			break
		}
	}
	if limit == 0 || limit == m.Vocab {
		t.Fatalf("%d marker words below id %d", limit, m.Vocab)
	}
	spec := testConfig(requests(limit+1, 4)).Workload
	spec.UniquePrompts = true
	_, err := buildWorkload(testBuild(2), spec, m, 0)
	if err == nil || !errors.Is(err, ErrBadConfig) {
		t.Fatalf("%d requests with %d marker words: err %v, want ErrBadConfig", limit+1, limit, err)
	}
	for _, want := range []string{"--unique-prompts", "--num-requests must be at most " + strconv.Itoa(limit) + " ", "got " + strconv.Itoa(limit+1)} {
		if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("error %q: want one line containing %q", err, want)
		}
	}
}

// TestLongPromptRefusedEarly: a prompt too long for the model is refused from its bytes when
// they alone exceed the limit, else from the first request's tokens, without tokenizing the other
// requests' prompts.
func TestLongPromptRefusedEarly(t *testing.T) {
	for _, c := range []struct {
		repeats, maxSeqLen, encodes int
		want                        string
	}{
		{100_000, 0, 0, "a prompt of 500003 bytes (at least "},              // bytes alone: no token counted
		{2000, 0, 1, "a prompt of 2001 tokens + --max-new-tokens 4 = 2005"}, // tokens of the first request
		{200, 100, 1, "--max-seq-len 100 is shorter than the longest request: a prompt of 201 tokens"},
	} {
		m := gpt2Model(t, 1024)
		codec := &encodeCounter{TextCodec: m.Codec, long: 100}
		m.Codec = codec
		spec := testConfig(requests(10, 4)).Workload
		spec.UniquePrompts, spec.PromptRepeats = true, c.repeats
		_, err := buildWorkload(testBuild(2), spec, m, c.maxSeqLen)
		if err == nil || !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--prompt-repeats %d --max-seq-len %d: err %v, want ErrBadConfig containing %q", c.repeats, c.maxSeqLen, err, c.want)
		}
		if codec.n != c.encodes {
			t.Errorf("--prompt-repeats %d --max-seq-len %d: %d prompts tokenized before the refusal, want %d", c.repeats, c.maxSeqLen, codec.n, c.encodes)
		}
	}
}

// TestRunProgressCountsDatasetOutputs: a dataset run's token total is the sum of its requests'
// output lengths, not --max-new-tokens per request.
func TestRunProgressCountsDatasetOutputs(t *testing.T) {
	p := newFakeProvider()
	p.hold = 1 // the run stays in progress
	cfg := testConfig(requests(8, 64), runs(0, 1), func(c *Config) {
		c.Workload.Dataset = &Dataset{Kind: "random", InputLen: 8, OutputLen: 4, Seed: 1}
	})
	s, published := newFakeSession(t, p, cfg)
	v := waitFor(t, s, published, "a run in progress", func(v *View) bool { return v.Header.Run != nil })
	if got := v.Header.Run.MaxTokens; got != 8*4 {
		t.Errorf("progress total %d tokens, want 32 (8 requests of 4 output tokens)", got)
	}
}
