package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// randomBounds are the random dataset's length ranges, as vLLM's get_sampling_params draws them
// (vllm/benchmarks/datasets/random.py): the sampled part of a prompt in [floor(L*(1-r)),
// ceil(L*(1+r))] for --input-len L, after a --random-prefix-len prefix that the range ratio leaves
// alone; outputs likewise, at least 1. As vLLM's sample() does, it refuses settings whose
// shortest prompt, prefix included, is empty (GPT-2 adds no special tokens to count off).
func (d *Dataset) randomBounds() (inLo, inHi, outLo, outHi int, err error) {
	r := d.RangeRatio
	switch {
	case d.InputLen < 0 || d.InputLen > maxRequestTokens:
		return 0, 0, 0, 0, &ConfigError{msg: fmt.Sprintf("--input-len must be from 0 to %d, got %d", maxRequestTokens, d.InputLen)}
	case d.OutputLen < 1 || d.OutputLen > maxRequestTokens:
		return 0, 0, 0, 0, &ConfigError{msg: fmt.Sprintf("--output-len must be from 1 to %d, got %d", maxRequestTokens, d.OutputLen)}
	case d.PrefixLen < 0 || d.PrefixLen > maxRequestTokens:
		return 0, 0, 0, 0, &ConfigError{msg: fmt.Sprintf("--random-prefix-len must be from 0 to %d, got %d", maxRequestTokens, d.PrefixLen)}
	case !(r >= 0 && r < 1):
		return 0, 0, 0, 0, &ConfigError{msg: fmt.Sprintf("--range-ratio must be in [0, 1), got %v", r)}
	}
	inLo, inHi = int(math.Floor(float64(d.InputLen)*(1-r))), int(math.Ceil(float64(d.InputLen)*(1+r)))
	outLo, outHi = max(1, int(math.Floor(float64(d.OutputLen)*(1-r)))), max(1, int(math.Ceil(float64(d.OutputLen)*(1+r))))
	if d.PrefixLen+inLo < 1 {
		return 0, 0, 0, 0, &ConfigError{msg: fmt.Sprintf("--input-len %d with --range-ratio %v can sample an empty prompt: give a longer --input-len, a smaller --range-ratio or a --random-prefix-len", d.InputLen, r)}
	}
	return inLo, inHi, outLo, outHi, nil
}

// sampleRandom is vLLM's random dataset (vllm/benchmarks/datasets/random.py): lengths within
// randomBounds, and prompts of the shared prefix followed by consecutive vocabulary ids from a
// random offset, decoded and re-encoded to prefix + sampled length. The lengths and offsets come
// from one seeded stream, then the prefix (vLLM's get_prefix, fitted to its length on its own),
// as vLLM draws them before any prompt; each prompt is then fitted on the build's workers from a
// stream of its own, so the sample does not depend on their number.
func (d *Dataset) sampleRandom(b build, n, positions int, voc vocab) ([]sampled, error) {
	inLo, inHi, outLo, outHi, err := d.randomBounds()
	if err != nil {
		return nil, err
	}
	if total := d.PrefixLen + inHi + outHi; total > positions {
		lens := fmt.Sprintf("--input-len %d and --output-len %d", d.InputLen, d.OutputLen)
		if d.PrefixLen > 0 {
			lens = fmt.Sprintf("--random-prefix-len %d, --input-len %d and --output-len %d", d.PrefixLen, d.InputLen, d.OutputLen)
		}
		return nil, &ConfigError{msg: fmt.Sprintf("%s with --range-ratio %v reach %d tokens, more than the model's %d positions", lens, d.RangeRatio, total, positions)}
	}
	rng := rand.New(rand.NewPCG(d.Seed, 0xda7a))
	inLens, offsets := make([]int, n), make([]int, n)
	out := make([]sampled, n)
	for i := range out {
		inLens[i], out[i].maxNew = inLo+rng.IntN(inHi-inLo+1), outLo+rng.IntN(outHi-outLo+1)
		offsets[i] = rng.IntN(len(voc.allowed))
	}
	var prefix []int32 // read-only once made
	if d.PrefixLen > 0 {
		prefix = make([]int32, d.PrefixLen)
		for j := range prefix {
			prefix[j] = voc.allowed[rng.IntN(len(voc.allowed))]
		}
		_, prefix = voc.fitLength(prefix, d.PrefixLen, rng)
	}
	p := b.progress(fmt.Sprintf("building %d prompts (%s)", n, d.source()))
	err = b.each(n, func(done int) { p.update(int64(done), int64(n)) }, func(i int) {
		ids := make([]int32, len(prefix), len(prefix)+inLens[i])
		copy(ids, prefix)
		for j := range inLens[i] {
			ids = append(ids, voc.allowed[(offsets[i]+i+j)%len(voc.allowed)])
		}
		out[i].text, out[i].tokens = voc.fitLength(ids, d.PrefixLen+inLens[i], rand.New(rand.NewPCG(d.Seed^0xda7a, uint64(i))))
	})
	if err != nil {
		return nil, err
	}
	p.done()
	return out, nil
}
