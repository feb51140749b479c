package tokenizer

import (
	"fmt"
	"index/suffixarray"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// source is a vocabulary as read from files, before it is checked and turned into a Tokenizer.
type source struct {
	vocabFile  string         // file named in errors about vocab and special
	vocab      map[string]int // token in GPT-2's printable byte alphabet -> id
	mergesFile string         // file named in errors about merges
	merges     [][2]string    // pairs in priority order, alphabet form; nil: not checked
	special    map[string]int // raw text -> id (or idFromVocab); split out of the text before BPE
	addedFile  string         // file named in errors about special ids; "": vocabFile
}

// specialFile is the file that gave the special tokens their ids.
func (s *source) specialFile() string {
	if s.addedFile != "" {
		return s.addedFile
	}
	return s.vocabFile
}

// idFromVocab as a special token's id means "the id the vocabulary gives it" (vocab.json lists
// <|endoftext|> among the ordinary tokens).
const idFromVocab = -1

func (s *source) bad(file, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", file, ErrInvalid, fmt.Sprintf(format, args...))
}

// build checks a vocabulary and makes the Tokenizer: ids dense, a token for every byte,
// <|endoftext|> present, and (when merges are given) BPE by token id equal to BPE by merge order.
func build(s source) (*Tokenizer, error) {
	special, err := s.resolveSpecial()
	if err != nil {
		return nil, err
	}
	tokens, ranks, err := s.tokenTable(special)
	if err != nil {
		return nil, err
	}
	if s.merges != nil {
		if err := checkMerges(s.merges, s.vocab, special); err != nil {
			return nil, s.bad(s.mergesFile, "%v", err)
		}
	}
	t := &Tokenizer{tokens: tokens, ranks: ranks, special: special, eos: int32(special[EndOfText]), cache: newPieceCache(),
		scratch: &sync.Pool{New: func() any { return new(mergeScratch) }}}
	for b := range 256 {
		t.byteID[b] = int32(ranks[string([]byte{byte(b)})])
	}
	t.pairRank, t.maxTokenLen = pairRanks(ranks)
	for text := range special {
		t.specials = append(t.specials, text)
	}
	slices.Sort(t.specials)
	return t, nil
}

// resolveSpecial gives every special token its id and checks that <|endoftext|> is one and that
// no special token contains another: Encode takes the leftmost occurrence, which is then the
// only one starting there, as Hugging Face's leftmost-longest rule would (tiktoken-go, the tests'
// reference, matches them with an alternation built in map order, where the winner is chance).
func (s *source) resolveSpecial() (map[string]int, error) {
	special := make(map[string]int, len(s.special))
	for text, id := range s.special {
		v, inVocab := s.vocab[text]
		switch {
		case id == idFromVocab && !inVocab:
			return nil, s.bad(s.vocabFile, "no %s token", text)
		case id == idFromVocab:
			id = v
		case inVocab && v != id:
			return nil, s.bad(s.specialFile(), "special token %q has id %d but the vocabulary gives %d", text, id, v)
		}
		special[text] = id
	}
	if _, ok := special[EndOfText]; !ok {
		return nil, s.bad(s.vocabFile, "no %s token", EndOfText)
	}
	if a, b, ok := nested(special); ok {
		return nil, s.bad(s.specialFile(), "special token %q lies inside %q (unsupported)", a, b)
	}
	return special, nil
}

// nested finds a special token lying inside another, in time near-linear in their bytes (a
// file may list a million): the tokens, each after a 0xff byte (which valid UTF-8, and so a
// token from JSON, never holds), are indexed as one text, where a token found twice is also
// inside another. The first such token in sorted order is reported.
func nested(special map[string]int) (inner, outer string, ok bool) {
	texts := make([]string, 0, len(special))
	for text := range special {
		texts = append(texts, text)
	}
	slices.Sort(texts)
	var all []byte
	starts := make([]int, len(texts)) // where each token begins in all
	for i, text := range texts {
		all = append(all, 0xff)
		starts[i] = len(all)
		all = append(all, text...)
	}
	index := suffixarray.New(all)
	for _, a := range texts {
		if strings.IndexByte(a, 0xff) >= 0 {
			continue // not valid UTF-8: never from JSON
		}
		for _, at := range index.Lookup([]byte(a), 2) {
			j, found := slices.BinarySearch(starts, at)
			if !found {
				j-- // inside the token that starts before at
			}
			if texts[j] != a {
				return a, texts[j], true
			}
		}
	}
	return "", "", false
}

// tokenTable returns each id's raw bytes and the rank table (raw bytes -> id, special tokens left
// out). Rank-based BPE (tiktoken's, and Encode's) uses a token's rank as its id, which is why the
// ids must be dense.
func (s *source) tokenTable(special map[string]int) (tokens [][]byte, ranks map[string]int, err error) {
	n := len(s.vocab)
	for text := range special {
		if _, inVocab := s.vocab[text]; !inVocab {
			n++
		}
	}
	tokens = make([][]byte, n)
	ranks = make(map[string]int, len(s.vocab))
	// Dense ids with none taken twice means every id gets a token.
	place := func(file, tok string, id int, raw []byte) error {
		switch {
		case id < 0 || id >= n:
			return s.bad(file, "token %q has id %d, outside 0..%d (ids must be dense)", tok, id, n-1)
		case tokens[id] != nil:
			return s.bad(file, "token %q has id %d, which another token (bytes %q) has too", tok, id, tokens[id])
		}
		tokens[id] = raw
		return nil
	}
	for text, id := range special {
		if err := place(s.specialFile(), text, id, []byte(text)); err != nil {
			return nil, nil, err
		}
	}
	for tok, id := range s.vocab {
		if _, isSpecial := special[tok]; isSpecial {
			continue
		}
		raw, err := alphabetToBytes(tok)
		if err != nil {
			return nil, nil, s.bad(s.vocabFile, "token %q (id %d): %v", tok, id, err)
		}
		if err := place(s.vocabFile, tok, id, raw); err != nil {
			return nil, nil, err
		}
		ranks[string(raw)] = id
	}
	for b := range 256 {
		if _, ok := ranks[string([]byte{byte(b)})]; !ok {
			return nil, nil, s.bad(s.vocabFile, "no token for byte 0x%02x (a byte-level vocabulary has all 256)", b)
		}
	}
	return tokens, ranks, nil
}

// checkMerges verifies that BPE by token rank (tiktoken) equals BPE by merge rank (Hugging Face):
// each merge joins two known tokens into a known token, the merged tokens' ids rise with the merge
// order, and every multi-byte ordinary token is made by exactly one merge.
func checkMerges(merges [][2]string, vocab map[string]int, special map[string]int) error {
	made := make(map[string]int, len(merges))
	prev := -1
	for i, m := range merges {
		for _, part := range m {
			if _, ok := vocab[part]; !ok {
				return fmt.Errorf("merge %d (%q %q): %q is not in the vocabulary", i+1, m[0], m[1], part)
			}
		}
		joined := m[0] + m[1]
		id, ok := vocab[joined]
		switch {
		case !ok:
			return fmt.Errorf("merge %d (%q %q): the result %q is not in the vocabulary", i+1, m[0], m[1], joined)
		case made[joined] > 0:
			return fmt.Errorf("merge %d (%q %q): %q is already made by merge %d", i+1, m[0], m[1], joined, made[joined])
		case id <= prev:
			return fmt.Errorf("merge %d (%q %q): result id %d is not above the previous merge's %d (ids must follow merge order)",
				i+1, m[0], m[1], id, prev)
		}
		made[joined] = i + 1
		prev = id
	}
	for tok, id := range vocab {
		if _, isSpecial := special[tok]; isSpecial || utf8.RuneCountInString(tok) < 2 {
			continue
		}
		if made[tok] == 0 {
			return fmt.Errorf("token %q (id %d) is not made by any merge", tok, id)
		}
	}
	return nil
}
