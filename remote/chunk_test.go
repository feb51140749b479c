package remote

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// refDecode is the reference for decodeChunk: encoding/json into generic values, then the
// shape rules of chunk's comment applied to them.
func refDecode(data []byte) (chunk, bool) {
	c := chunk{tokenIDs: -1, completion: -1, prompt: -1}
	if !json.Valid(data) {
		return c, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil || top == nil {
		return c, false
	}
	integer := func(v any) (int64, bool) {
		n, ok := v.(json.Number)
		if !ok {
			return 0, false
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		return i, err == nil
	}
	optString := func(v any, dst *string) bool {
		if v == nil {
			return true
		}
		s, ok := v.(string)
		*dst = s
		return ok
	}
	if v, ok := top["choices"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			return c, false
		}
		for i, e := range list {
			ch, ok := e.(map[string]any)
			if !ok {
				return c, false
			}
			c.choices++
			var text, content, finish string
			if !optString(ch["text"], &text) || !optString(ch["finish_reason"], &finish) {
				return c, false
			}
			if d, ok := ch["delta"]; ok && d != nil {
				dm, ok := d.(map[string]any)
				if !ok || !optString(dm["content"], &content) {
					return c, false
				}
			}
			n := -1
			if ids, ok := ch["token_ids"]; ok && ids != nil {
				l, ok := ids.([]any)
				if !ok {
					return c, false
				}
				for _, id := range l {
					if _, ok := integer(id); !ok {
						return c, false
					}
				}
				n = len(l)
			}
			if i == 0 {
				c.text, c.hasText, c.content, c.tokenIDs = text, ch["text"] != nil, content, n
			}
			if c.finish == "" {
				c.finish = finish
			}
		}
	}
	if v, ok := top["usage"]; ok && v != nil {
		u, ok := v.(map[string]any)
		if !ok {
			return c, false
		}
		for key, dst := range map[string]*int64{"completion_tokens": &c.completion, "prompt_tokens": &c.prompt} {
			if x, ok := u[key]; ok && x != nil {
				if *dst, ok = integer(x); !ok {
					return c, false
				}
			}
		}
	}
	if e, ok := top["error"]; ok && e != nil {
		c.errRaw = []byte("x")
	}
	c.object, _ = top["object"].(string)
	c.message, _ = top["message"].(string)
	return c, true
}

// same compares what the stream reads from two decoded chunks.
func same(a, b chunk) bool {
	am, aerr := a.errorMessage()
	bm, berr := b.errorMessage()
	if a.errRaw != nil || b.errRaw != nil {
		am, bm = "", "" // the reference keeps no raw bytes: compare presence only
	}
	return a.choices == b.choices && a.textOf() == b.textOf() && a.finish == b.finish && a.tokenIDs == b.tokenIDs &&
		a.completion == b.completion && a.prompt == b.prompt && aerr == berr && am == bm
}

func TestDecodeChunk(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
		text string
	}{
		{"plain", `{"choices":[{"text":"hi"}]}`, true, "hi"},
		{"escapes", `{"choices":[{"text":"a\"b\\c\n\u00e9\ud83d\ude00"}]}`, true, "a\"b\\c\né😀"},
		{"lone surrogate", `{"choices":[{"text":"\ud800x"}]}`, true, "\ufffdx"},
		{"invalid utf-8", "{\"choices\":[{\"text\":\"a\xffb\"}]}", true, "a\ufffdb"},
		{"delta content", `{"choices":[{"delta":{"role":"assistant","content":"yo"}}]}`, true, "yo"},
		{"null content", `{"choices":[{"delta":{"content":null,"role":"assistant"}}]}`, true, ""},
		{"text wins over delta", `{"choices":[{"delta":{"content":"d"},"text":"t"}]}`, true, "t"},
		{"duplicate member: last wins", `{"choices":[{"text":"a"}],"choices":[{"text":"b"}]}`, true, "b"},
		{"escaped key", `{"ch\u006fices":[{"text":"k"}]}`, true, "k"},
		{"unknown nested members", `{"x":{"y":[1,2.5e-3,{"z":null}],"w":true},"choices":[{"logprobs":{"a":[-0.1]},"text":"n"}]}`, true, "n"},
		{"whitespace", " \t\r\n{ \"choices\" : [ { \"text\" : \"w\" } ] } \n", true, "w"},
		{"not an object", `["choices"]`, false, ""},
		{"trailing data", `{"choices":[]} x`, false, ""},
		{"two objects", `{}{}`, false, ""},
		{"text not a string", `{"choices":[{"text":5}]}`, false, ""},
		{"choices not an array", `{"choices":{"text":"a"}}`, false, ""},
		{"token id not an integer", `{"choices":[{"token_ids":[1.5]}]}`, false, ""},
		{"usage count not an integer", `{"usage":{"completion_tokens":3.0}}`, false, ""},
		{"usage count too large", `{"usage":{"completion_tokens":99999999999999999999}}`, false, ""},
		{"leading zero", `{"x":01}`, false, ""},
		{"bad escape", `{"x":"\q"}`, false, ""},
		{"control character", "{\"x\":\"a\x01\"}", false, ""},
		{"truncated", `{"choices":[{"text":"a`, false, ""},
		{"too deep", `{"x":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`, false, ""},
		{"deep enough", `{"x":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}`, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c chunk
			ok := decodeChunk([]byte(tt.in), &c)
			ref, refOK := refDecode([]byte(tt.in))
			if ok != tt.ok || refOK != tt.ok {
				t.Fatalf("decodeChunk ok=%v, reference ok=%v, want %v", ok, refOK, tt.ok)
			}
			if ok && (c.textOf() != tt.text || !same(c, ref)) {
				t.Fatalf("text %q, want %q; chunk %+v, reference %+v", c.textOf(), tt.text, c, ref)
			}
		})
	}
}

// FuzzDecodeChunk: decodeChunk accepts exactly what the reference accepts and reads the same.
func FuzzDecodeChunk(f *testing.F) {
	for _, fm := range formats {
		for _, line := range strings.Split(fm.stream, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				f.Add([]byte(d))
			}
		}
	}
	f.Add([]byte(`{"choices":[{"text":"a\u00e9","token_ids":[1,-2]},{"finish_reason":"stop"}],"usage":{"completion_tokens":null}}`))
	f.Add([]byte(`{"error":{"message":"m"},"object":"error","message":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c chunk
		ok := decodeChunk(data, &c)
		ref, refOK := refDecode(data)
		if ok != refOK {
			t.Fatalf("decodeChunk ok=%v, reference ok=%v", ok, refOK)
		}
		if ok && !same(c, ref) {
			t.Fatalf("chunk %+v\nreference %+v", c, ref)
		}
	})
}
