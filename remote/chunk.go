package remote

import (
	"bytes"
	"encoding/json"
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
//
// Any member may be absent or null.
type chunk struct {
	choices    int    // len(choices)
	text       string // choices[0].text
	hasText    bool   // choices[0].text is a string (not absent or null)
	content    string // choices[0].delta.content
	finish     string // the first non-empty finish_reason among the choices
	tokenIDs   int    // len(choices[0].token_ids); -1 when absent or null
	completion int64  // usage.completion_tokens; -1 when absent or null
	prompt     int64  // usage.prompt_tokens; -1 when absent or null
	errRaw     []byte // the error member unless absent or null (aliases the input)
	object     string // the object member when it is a string
	message    string // the message member when it is a string
}

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
		c.completion, c.prompt = -1, -1
		if p.null() {
			return true
		}
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
