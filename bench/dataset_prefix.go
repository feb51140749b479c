package bench

import (
	"fmt"
	"math/rand/v2"
)

// validatePrefixRepetition checks prefix_repetition's settings for a run of n requests. As vLLM's
// PrefixRepetitionRandomDataset, each prefix serves n / NumPrefixes requests (rounded down, at
// least 1); the command line makes n a multiple, so that the run has the requests it asks for.
func (d *Dataset) validatePrefixRepetition(n int) error {
	bad := func(format string, args ...any) error { return &ConfigError{msg: fmt.Sprintf(format, args...)} }
	switch {
	case d.PrefixLen < 0 || d.PrefixLen > maxRequestTokens:
		return bad("--prefix-repetition-prefix-len must be from 0 to %d, got %d", maxRequestTokens, d.PrefixLen)
	case d.SuffixLen < 0 || d.SuffixLen > maxRequestTokens:
		return bad("--prefix-repetition-suffix-len must be from 0 to %d, got %d", maxRequestTokens, d.SuffixLen)
	case d.PrefixLen+d.SuffixLen < 1:
		return bad("--prefix-repetition-prefix-len 0 and --prefix-repetition-suffix-len 0 make empty prompts: give either a length")
	case d.OutputLen < 1 || d.OutputLen > maxRequestTokens:
		return bad("--prefix-repetition-output-len must be from 1 to %d, got %d", maxRequestTokens, d.OutputLen)
	case d.NumPrefixes < 1 || n < d.NumPrefixes:
		return bad("--num-requests %d is fewer than --prefix-repetition-num-prefixes %d: each prefix needs a request", n, d.NumPrefixes)
	case n%d.NumPrefixes != 0:
		return bad("--num-requests %d is not a multiple of --prefix-repetition-num-prefixes %d (vLLM would run %d)", n, d.NumPrefixes, n/d.NumPrefixes*d.NumPrefixes)
	}
	return nil
}

// samplePrefixRepetition is vLLM's prefix_repetition dataset (prefix_repetition.py): NumPrefixes
// prefixes of PrefixLen random tokens, each followed in n/NumPrefixes requests by a suffix of
// SuffixLen random tokens of the request's own, each part fitted to its length on its own (vLLM's
// gen_prompt_decode_to_target_len) and the whole prompt to their sum; then the requests are
// shuffled with the seed. Tokens come from the plain vocabulary, where vLLM draws any id (EOS
// too), so that no prompt ends early or holds a special token.
func (d *Dataset) samplePrefixRepetition(b build, n, positions int, voc vocab) ([]sampled, error) {
	if err := d.validatePrefixRepetition(n); err != nil {
		return nil, err
	}
	total := d.PrefixLen + d.SuffixLen
	if total+d.OutputLen > positions {
		return nil, &ConfigError{msg: fmt.Sprintf("--prefix-repetition-prefix-len %d, -suffix-len %d and -output-len %d reach %d tokens, more than the model's %d positions",
			d.PrefixLen, d.SuffixLen, d.OutputLen, total+d.OutputLen, positions)}
	}
	randomText := func(length int, rng *rand.Rand) string {
		ids := make([]int32, length)
		for j := range ids {
			ids[j] = voc.allowed[rng.IntN(len(voc.allowed))]
		}
		text, _ := voc.fitLength(ids, length, rng)
		return text
	}
	prefixes := make([]string, d.NumPrefixes) // read-only once made
	err := b.each(d.NumPrefixes, nil, func(k int) {
		prefixes[k] = randomText(d.PrefixLen, rand.New(rand.NewPCG(d.Seed^0x9ef1, uint64(k))))
	})
	if err != nil {
		return nil, err
	}
	per := n / d.NumPrefixes
	out := make([]sampled, d.NumPrefixes*per)
	p := b.progress(fmt.Sprintf("building %d prompts (%s)", len(out), d.source()))
	err = b.each(len(out), func(done int) { p.update(int64(done), int64(len(out))) }, func(i int) {
		rng := rand.New(rand.NewPCG(d.Seed^0x5fec, uint64(i)))
		text := prefixes[i/per] + randomText(d.SuffixLen, rng)
		out[i].text, out[i].tokens = voc.fitLength(voc.codec.Encode(text), total, rng)
		out[i].maxNew = d.OutputLen
	})
	if err != nil {
		return nil, err
	}
	p.done()
	rng := rand.New(rand.NewPCG(d.Seed, 0x5fe1))
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out, nil
}
