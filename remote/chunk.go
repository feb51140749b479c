package remote

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// chunk is the part of a streamed completion chunk the client reads. It covers both APIs:
// completions put text in choices[].text, chat in choices[].delta.content. Error objects come
// in two shapes: {"error": {...} | "..."} (vLLM, SGLang, TGI, llama.cpp, Ollama) and the older
// flat {"object": "error", "message": ...} (early vLLM and SGLang).
//
// decodeChunk fills it with a scanner that reads only these members and skips (but checks) the
// rest: a stream carries one chunk per token, and a general decoder spends most of its time on
// the members nobody reads. The shapes it accepts are those of the JSON below; anything else
// (a member of the wrong type, a number where an integer belongs) makes the chunk malformed.
//
//	{"choices": [{"text": s, "delta": {"content": s}, "finish_reason": s, "token_ids": [i]}],
//	 "usage": {"prompt_tokens": i, "completion_tokens": i},
//	 "error": any, "object": any, "message": any}
type chunk struct {
	choices    int    // len(choices)
	text       string // choices[0].text
	hasText    bool   // choices[0].text is a string (not absent or null)
	content    string // choices[0].delta.content
	finish     string // the first non-empty finish_reason among the choices
	tokenIDs   int    // len(choices[0].token_ids); -1 when absent or null
	usage      bool   // usage is an object
	completion int64  // usage.completion_tokens; -1 when absent or null
	prompt     int64  // usage.prompt_tokens; -1 when absent or null
	errRaw     []byte // the error member unless absent or null (aliases the input)
	object     string // the object member when it is a string
	message    string // the message member when it is a string
}

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

// decodeChunk parses one data field into c. ok is false when data is not a JSON object of the
// shape above.
func decodeChunk(data []byte, c *chunk) bool {
	*c = chunk{tokenIDs: -1, completion: -1, prompt: -1}
	p := parser{b: data}
	p.ws()
	ok := p.object(func(key []byte) bool { return c.member(&p, key) })
	p.ws()
	return ok && p.i == len(p.b)
}

// member reads one top-level member.
func (c *chunk) member(p *parser, key []byte) bool {
	switch string(key) {
	case "choices":
		c.choices, c.text, c.hasText, c.content, c.finish, c.tokenIDs = 0, "", false, "", "", -1
		if p.null() {
			return true
		}
		return p.array(func() bool {
			c.choices++
			var finish string
			if !p.object(func(k []byte) bool { return c.choice(p, k, c.choices == 1, &finish) }) {
				return false
			}
			if c.finish == "" {
				c.finish = finish
			}
			return true
		})
	case "usage":
		c.usage, c.completion, c.prompt = false, -1, -1
		if p.null() {
			return true
		}
		c.usage = true
		return p.object(func(k []byte) bool {
			switch string(k) {
			case "completion_tokens":
				return p.optInt(&c.completion)
			case "prompt_tokens":
				return p.optInt(&c.prompt)
			}
			return p.skip()
		})
	case "error":
		p.ws()
		start := p.i
		if !p.skip() {
			return false
		}
		c.errRaw = p.b[start:p.i]
		if bytes.Equal(c.errRaw, []byte("null")) {
			c.errRaw = nil
		}
		return true
	case "object":
		return p.anyString(&c.object)
	case "message":
		return p.anyString(&c.message)
	}
	return p.skip()
}

// choice reads one member of a choice; first: the choice is choices[0]. A member given twice
// counts once, with its last value.
func (c *chunk) choice(p *parser, key []byte, first bool, finish *string) bool {
	switch string(key) {
	case "text":
		var s string
		if !p.optString(&s, first) {
			return false
		}
		if first {
			c.text, c.hasText = s, !p.wasNull
		}
		return true
	case "delta":
		if first {
			c.content = ""
		}
		if p.null() {
			return true
		}
		return p.object(func(k []byte) bool {
			if string(k) != "content" {
				return p.skip()
			}
			var s string
			if !p.optString(&s, first) {
				return false
			}
			if first {
				c.content = s
			}
			return true
		})
	case "finish_reason":
		*finish = ""
		return p.optString(finish, true)
	case "token_ids":
		if p.null() {
			if first {
				c.tokenIDs = -1
			}
			return true
		}
		n := 0
		ok := p.array(func() bool { n++; var v int64; return p.int(&v) })
		if first {
			c.tokenIDs = n
		}
		return ok
	}
	return p.skip()
}

// textOf is the chunk's text: choices[0]'s text, else its content delta. vLLM bench serve reads
// only the first choice; the client asks for one.
func (c *chunk) textOf() string {
	if c.hasText {
		return c.text
	}
	return c.content
}

// errorMessage is the message of an error object in the chunk, and whether there is one.
func (c *chunk) errorMessage() (string, bool) {
	if c.errRaw != nil {
		var obj struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(c.errRaw, &obj) == nil && obj.Message != "":
			return obj.Message, true
		case json.Unmarshal(c.errRaw, &s) == nil:
			return s, true
		}
		return string(c.errRaw), true
	}
	if c.object == "error" {
		return c.message, true
	}
	return "", false
}

// parser is a JSON scanner over one value. Every method reports whether the input so far is
// valid; on false the parse is abandoned.
type parser struct {
	b       []byte
	i       int
	depth   int  // open objects and arrays
	wasNull bool // the last optString read a null
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// lit consumes the literal s.
func (p *parser) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// null consumes a null, if that is what comes next.
func (p *parser) null() bool {
	p.ws()
	return p.lit("null")
}

// object reads {"key": value, ...}, calling member for each key with the parser at the value.
func (p *parser) object(member func(key []byte) bool) bool {
	p.ws()
	if !p.lit("{") || !p.enter() {
		return false
	}
	defer p.leave()
	p.ws()
	if p.lit("}") {
		return true
	}
	for {
		p.ws()
		key, ok := p.rawString()
		if !ok {
			return false
		}
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if json.Unmarshal(p.b[p.i-len(key)-2:p.i], &s) != nil {
				return false
			}
			key = []byte(s)
		}
		p.ws()
		if !p.lit(":") || !member(key) {
			return false
		}
		p.ws()
		if p.lit("}") {
			return true
		}
		if !p.lit(",") {
			return false
		}
	}
}

// array reads [value, ...], calling elem with the parser at each value.
func (p *parser) array(elem func() bool) bool {
	p.ws()
	if !p.lit("[") || !p.enter() {
		return false
	}
	defer p.leave()
	p.ws()
	if p.lit("]") {
		return true
	}
	for {
		if !elem() {
			return false
		}
		p.ws()
		if p.lit("]") {
			return true
		}
		if !p.lit(",") {
			return false
		}
	}
}

func (p *parser) enter() bool { p.depth++; return p.depth <= maxDepth }
func (p *parser) leave()      { p.depth-- }

// rawString reads a string and returns its bytes between the quotes, escapes unresolved.
func (p *parser) rawString() ([]byte, bool) {
	if !p.lit(`"`) {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return p.b[start : p.i-1], true
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return nil, false
			}
			switch p.b[p.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
			case 'u':
				if p.i+6 > len(p.b) {
					return nil, false
				}
				if _, err := strconv.ParseUint(string(p.b[p.i+2:p.i+6]), 16, 16); err != nil {
					return nil, false
				}
				p.i += 6
			default:
				return nil, false
			}
		case c < 0x20:
			return nil, false
		default:
			p.i++
		}
	}
	return nil, false
}

// optString reads a string or null into *dst (null leaves it); keep: store the value.
func (p *parser) optString(dst *string, keep bool) bool {
	p.wasNull = p.null()
	if p.wasNull {
		return true
	}
	start := p.i
	raw, ok := p.rawString()
	if !ok {
		return false
	}
	if !keep {
		return true
	}
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		*dst = string(raw)
		return true
	}
	// Escapes or invalid UTF-8: let encoding/json resolve them exactly.
	return json.Unmarshal(p.b[start:p.i], dst) == nil
}

// anyString reads any value, storing it in *dst when it is a string.
func (p *parser) anyString(dst *string) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '"' {
		return p.optString(dst, true)
	}
	*dst = ""
	return p.skip()
}

// optInt reads an integer or null into *dst (null: -1).
func (p *parser) optInt(dst *int64) bool {
	if p.null() {
		*dst = -1
		return true
	}
	return p.int(dst)
}

// int reads an integer: a JSON number without fraction or exponent that fits in an int64.
func (p *parser) int(dst *int64) bool {
	p.ws()
	start := p.i
	if !p.number() {
		return false
	}
	v, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	if err != nil {
		return false
	}
	*dst = v
	return true
}

// number reads a JSON number.
func (p *parser) number() bool {
	p.lit("-")
	switch {
	case p.lit("0"):
	case p.i < len(p.b) && p.b[p.i] >= '1' && p.b[p.i] <= '9':
		p.digits()
	default:
		return false
	}
	if p.lit(".") && !p.digits() {
		return false
	}
	if p.lit("e") || p.lit("E") {
		if !p.lit("+") {
			p.lit("-")
		}
		if !p.digits() {
			return false
		}
	}
	return true
}

// digits reads one or more decimal digits.
func (p *parser) digits() bool {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

// skip reads and checks any value.
func (p *parser) skip() bool {
	p.ws()
	if p.i >= len(p.b) {
		return false
	}
	switch p.b[p.i] {
	case '{':
		return p.object(func([]byte) bool { return p.skip() })
	case '[':
		return p.array(p.skip)
	case '"':
		_, ok := p.rawString()
		return ok
	case 't':
		return p.lit("true")
	case 'f':
		return p.lit("false")
	case 'n':
		return p.lit("null")
	}
	return p.number()
}
