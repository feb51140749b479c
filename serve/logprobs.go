package serve

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"rosetop/engine"
	"rosetop/engine/tokenizer"
)

// lpFloor is what a logprob below it (-inf: a token of probability 0) is answered as: vLLM's
// max(logprob, -9999.0), the value OpenAI uses.
const lpFloor = -9999.0

// lpEntry is one token of a position's logprobs, as vLLM keeps it (a dict[int, Logprob] entry):
// its id, log-probability, rank (Logprob.rank: 1 the most likely) and decoded text
// (Logprob.decoded_token). unscored marks a prompt's first token, which has no logprobs (vLLM's
// None position): the position holds it alone.
type lpEntry struct {
	id       int32
	logprob  float32
	rank     int
	text     string
	unscored bool
}

// lpPosition is one token's logprobs in vLLM's dict order: the sampled (or prompt) token first,
// then the most likely tokens not already listed, most likely first. It holds top or top+1
// entries, or one unscored entry.
type lpPosition []lpEntry

// unscoredPosition is a prompt's first token as vLLM answers it (a None position): the token
// decoded alone, without logprobs.
func unscoredPosition(tok Tokenizer, id int32) lpPosition {
	return lpPosition{{id: id, text: decodeIDs(tok, []int32{id}), unscored: true}}
}

// scored says the position has logprobs (it is not a prompt's first token).
func (p lpPosition) scored() bool { return len(p) > 0 && !p[0].unscored }

// lpDecoder turns the engine's logprobs of one choice's output tokens, in order, into positions,
// decoding each token as vLLM's LogprobsProcessor does (vllm/v1/engine/logprobs.py): every token
// alone, and a text that ends in U+FFFD (part of a character) fixed by _verify_tokens. It belongs
// to the choice's handler goroutine.
type lpDecoder struct {
	tok     Tokenizer
	prev    int32 // the previous position's sampled token (its dict's first key)
	hasPrev bool  // a position came before
}

func newLPDecoder(tok Tokenizer) *lpDecoder { return &lpDecoder{tok: tok} }

func (d *lpDecoder) decode(ids ...int32) string { return decodeIDs(d.tok, ids) }

// decodeIDs is the tokenizer's decode of ids: their bytes joined, special tokens included, each
// maximal ill-formed UTF-8 subpart as U+FFFD (Hugging Face's decode, as vLLM calls it).
func decodeIDs(tok Tokenizer, ids []int32) string {
	st := tokenizer.NewStream(tok)
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(st.Push(id))
	}
	b.WriteString(st.Flush())
	return b.String()
}

// position is the next output token's logprobs (entries), the token then before the next one's.
func (d *lpDecoder) position(lp engine.TokenLogprobs) lpPosition {
	pos := d.entries(lp)
	d.prev, d.hasPrev = lp.Sampled.Token, true
	return pos
}

// entries are one position's logprobs. As vLLM's LogprobsProcessor does, it decodes [sampled,
// top...] one token at a time, corrects those ending in U+FFFD, and builds the dict (the sampled
// token's rank lp.Rank, top entry k's k+1): an id listed twice (the sampled token among the top)
// keeps its first place and its last value.
func (d *lpDecoder) entries(lp engine.TokenLogprobs) lpPosition {
	ids := make([]int32, 0, 1+len(lp.Top))
	lps := make([]float32, 0, 1+len(lp.Top))
	ids, lps = append(ids, lp.Sampled.Token), append(lps, lp.Sampled.Logprob)
	for _, t := range lp.Top {
		ids, lps = append(ids, t.Token), append(lps, t.Logprob)
	}
	texts := make([]string, len(ids))
	for i, id := range ids {
		texts[i] = d.decode(id)
	}
	for i := range texts { // corrections read ids only: the order they are made in does not matter
		if strings.HasSuffix(texts[i], "\uFFFD") {
			texts[i] = d.correct(i, ids)
		}
	}
	pos := make(lpPosition, 0, len(ids))
	for i, id := range ids {
		e := lpEntry{id: id, logprob: lps[i], rank: i, text: texts[i]}
		if i == 0 {
			e.rank = lp.Rank
		}
		if k := pos.index(id); k >= 0 {
			pos[k] = e
			continue
		}
		pos = append(pos, e)
	}
	return pos
}

// promptPositions are the prompt's logprobs as vLLM answers them: its first token unscored, then
// prompt[j+1]'s from lps[j]. A token that is part of a character is corrected as vLLM's
// _correct_decoded_token does when it reads them: with the entry before it in its position, else
// after the request's first output token (first; nil when the request asked for no output
// logprobs), the one sampled position vLLM has recorded by then.
func promptPositions(tok Tokenizer, prompt []int32, lps []engine.TokenLogprobs, first *int32) []lpPosition {
	d := newLPDecoder(tok)
	if first != nil {
		d.prev, d.hasPrev = *first, true
	}
	out := make([]lpPosition, 0, len(prompt))
	out = append(out, unscoredPosition(tok, prompt[0]))
	for _, x := range lps {
		out = append(out, d.entries(x))
	}
	return out
}

// correct is vLLM's _correct_decoded_token for entry i of ids (one position's sampled and top
// tokens): the text of entry i-1 and i (when i > 0), else of the previous position's sampled token
// followed by those (by entry i alone when i == 0), the first that does not end in U+FFFD; ""
// when neither.
func (d *lpDecoder) correct(i int, ids []int32) string {
	if i > 0 {
		if s := d.decode(ids[i-1 : i+1]...); !strings.HasSuffix(s, "\uFFFD") {
			return s
		}
	}
	if d.hasPrev {
		with := []int32{d.prev}
		if i > 0 {
			with = append(with, ids[i-1:i+1]...)
		} else {
			with = append(with, ids[i])
		}
		if s := d.decode(with...); !strings.HasSuffix(s, "\uFFFD") {
			return s
		}
	}
	return ""
}

func (p lpPosition) index(id int32) int {
	for k, e := range p {
		if e.id == id {
			return k
		}
	}
	return -1
}

// lpValue is a logprob as vLLM answers it: at least lpFloor (a NaN too, which JSON cannot hold),
// the float32 widened as Python's float() widens it.
func lpValue(x float32) float64 {
	v := float64(x)
	if math.IsNaN(v) || v < lpFloor {
		return lpFloor
	}
	return v
}

// lpToken is how an entry's token is spelled: its text, or "token_id:N" with
// return_tokens_as_token_ids (vLLM's _get_decoded_token, format_token_id_placeholder).
func lpToken(e lpEntry, asIDs bool) string {
	if asIDs {
		return "token_id:" + strconv.Itoa(int(e.id))
	}
	return e.text
}

// completionLogprobs is a /v1/completions choice's logprobs (vLLM's CompletionLogProbs). An
// unscored position (echo's first prompt token) has null token_logprobs and top_logprobs.
type completionLogprobs struct {
	TextOffset    []int      `json:"text_offset"`
	TokenLogprobs []*float64 `json:"token_logprobs"`
	Tokens        []string   `json:"tokens"`
	TopLogprobs   []lpByText `json:"top_logprobs"`
}

// lpByText is one position's top_logprobs, a JSON object from token text to logprob in insertion
// order; a text met twice keeps its first place and its last value, as a Python dict does. nil
// is null.
type lpByText []lpKV

type lpKV struct {
	key string
	v   float64
}

func (m *lpByText) set(key string, v float64) {
	for k := range *m {
		if (*m)[k].key == key {
			(*m)[k].v = v
			return
		}
	}
	*m = append(*m, lpKV{key, v})
}

func (m lpByText) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	var b bytes.Buffer
	w := newStringWriter(&b)
	b.WriteByte('{')
	for k, kv := range m {
		if k > 0 {
			b.WriteByte(',')
		}
		if err := w.write(kv.key); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		v, err := json.Marshal(kv.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// stringWriter writes JSON strings into its buffer, HTML characters as they are (the reply's
// encoder escapes them or not).
type stringWriter struct {
	b   *bytes.Buffer
	enc *json.Encoder
}

func newStringWriter(b *bytes.Buffer) stringWriter {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	return stringWriter{b, enc}
}

func (w stringWriter) write(s string) error {
	if err := w.enc.Encode(s); err != nil {
		return err
	}
	w.b.Truncate(w.b.Len() - 1) // Encode's newline
	return nil
}

// completionLogprobsOf is vLLM's _create_completion_logprobs (serving_completion.py, now
// completion/serving.py) over the tokens of ps (echo's prompt tokens, then output tokens): each
// token's text and logprob, the sampled token and the top ones keyed by text (entries 0..top of
// the dict: all of them), and text_offset, which starts at offset and adds each token's text
// length in code points. An unscored position has its token's text and nulls.
func completionLogprobsOf(ps []lpPosition, top, offset int, asIDs bool) *completionLogprobs {
	out := &completionLogprobs{
		TextOffset: make([]int, 0, len(ps)), TokenLogprobs: make([]*float64, 0, len(ps)),
		Tokens: make([]string, 0, len(ps)), TopLogprobs: make([]lpByText, 0, len(ps)),
	}
	lastLen := 0
	for i, p := range ps {
		token := lpToken(p[0], asIDs) // the sampled token is the dict's first key
		out.Tokens = append(out.Tokens, token)
		if p.scored() {
			v := lpValue(p[0].logprob)
			out.TokenLogprobs = append(out.TokenLogprobs, &v)
			out.TopLogprobs = append(out.TopLogprobs, topByText(p, top, asIDs))
		} else {
			out.TokenLogprobs, out.TopLogprobs = append(out.TokenLogprobs, nil), append(out.TopLogprobs, nil)
		}
		if i == 0 {
			out.TextOffset = append(out.TextOffset, offset)
		} else {
			out.TextOffset = append(out.TextOffset, out.TextOffset[i-1]+lastLen)
		}
		lastLen = utf8.RuneCountInString(token) // Python's len of a str
	}
	return out
}

// topByText is a scored position's top_logprobs: its dict's entries 0..top keyed by token text.
func topByText(p lpPosition, top int, asIDs bool) lpByText {
	tops := make(lpByText, 0, len(p))
	for k, e := range p {
		if top >= k {
			tops.set(lpToken(e, asIDs), lpValue(e.logprob))
		}
	}
	return tops
}

// chatLogprobs is a /v1/chat/completions choice's logprobs (vLLM's ChatCompletionLogProbs).
type chatLogprobs struct {
	Content []chatLogprobToken `json:"content"`
}

// chatLogprob is a token, its logprob and its text's UTF-8 bytes (vLLM's ChatCompletionLogProb).
type chatLogprob struct {
	Token   string   `json:"token"`
	Logprob float64  `json:"logprob"`
	Bytes   byteList `json:"bytes"`
}

type chatLogprobToken struct {
	chatLogprob
	TopLogprobs []chatLogprob `json:"top_logprobs"`
}

// byteList is a JSON list of byte values ([] when empty), not encoding/json's base64.
type byteList []byte

func (b byteList) MarshalJSON() ([]byte, error) {
	out := make([]byte, 0, 2+4*len(b))
	out = append(out, '[')
	for i, c := range b {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, int64(c), 10)
	}
	return append(out, ']'), nil
}

// chatLogprobsOf is vLLM's _create_chat_logprobs (serving_chat.py, now chat_completion/serving.py)
// over the output tokens of ps: each token's text, logprob and the bytes of its decoded text (of
// the text even with return_tokens_as_token_ids), and top_logprobs: the dict's first top entries,
// the sampled token first (_get_top_logprobs), each with the bytes of the token as spelled.
func chatLogprobsOf(ps []lpPosition, top int, asIDs bool) *chatLogprobs {
	out := &chatLogprobs{Content: make([]chatLogprobToken, 0, len(ps))}
	for _, p := range ps {
		c := chatLogprobToken{
			chatLogprob: chatLogprob{Token: lpToken(p[0], asIDs), Logprob: lpValue(p[0].logprob), Bytes: byteList(p[0].text)},
			TopLogprobs: make([]chatLogprob, 0, min(top, len(p))),
		}
		for k, e := range p {
			if k < top {
				t := lpToken(e, asIDs)
				c.TopLogprobs = append(c.TopLogprobs, chatLogprob{Token: t, Logprob: lpValue(e.logprob), Bytes: byteList(t)})
			}
		}
		out.Content = append(out.Content, c)
	}
	return out
}

// promptLogprobs is vLLM's prompt_logprobs field: one entry a prompt token, null for the first,
// else an object from token id to {"logprob", "rank", "decoded_token"} in the dict's order, -inf
// as -9999 (vLLM's clamp_prompt_logprobs).
type promptLogprobs []lpPosition

func (ps promptLogprobs) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	w := newStringWriter(&b)
	b.WriteByte('[')
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		if !p.scored() {
			b.WriteString("null")
			continue
		}
		if err := writePromptPosition(w, p); err != nil {
			return nil, err
		}
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

// promptLPValue is a prompt_logprobs value as vLLM's clamp_prompt_logprobs writes it: -inf as
// -9999, any other as it is (NaN, which the engine never reports, as -9999: JSON has no NaN).
func promptLPValue(x float32) float64 {
	v := float64(x)
	if math.IsInf(v, -1) || math.IsNaN(v) {
		return lpFloor
	}
	return v
}

// writePromptPosition writes one scored position of prompt_logprobs: its dict, keyed by id.
func writePromptPosition(w stringWriter, p lpPosition) error {
	b := w.b
	b.WriteByte('{')
	for k, e := range p {
		if k > 0 {
			b.WriteByte(',')
		}
		v, err := json.Marshal(promptLPValue(e.logprob))
		if err != nil {
			return err
		}
		b.WriteString(`"` + strconv.Itoa(int(e.id)) + `":{"logprob":`)
		b.Write(v)
		b.WriteString(`,"rank":` + strconv.Itoa(e.rank) + `,"decoded_token":`)
		if err := w.write(e.text); err != nil {
			return err
		}
		b.WriteByte('}')
	}
	b.WriteByte('}')
	return nil
}
