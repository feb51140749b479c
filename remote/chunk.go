package remote

import (
	"bytes"
	"encoding/json"
	"strings"
)

// wireChunk is the part of a streamed completion chunk the client reads. It covers both APIs:
// completions put text in choices[].text, chat in choices[].delta.content. Error objects come
// in two shapes: {"error": {...} | "..."} (vLLM, SGLang, TGI, llama.cpp, Ollama) and the older
// flat {"object": "error", "message": ...} (early vLLM and SGLang).
type wireChunk struct {
	Choices []wireChoice    `json:"choices"`
	Usage   *wireUsage      `json:"usage"`
	Error   json.RawMessage `json:"error"`
	Object  string          `json:"object"`
	Message string          `json:"message"`
}

type wireChoice struct {
	Text         *string    `json:"text"`
	Delta        *wireDelta `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
	TokenIDs     []int32    `json:"token_ids"` // vLLM and SGLang with return_token_ids
}

type wireDelta struct {
	Content *string `json:"content"`
}

type wireUsage struct {
	PromptTokens     *int `json:"prompt_tokens"`
	CompletionTokens *int `json:"completion_tokens"`
}

// decodeChunk parses one data field. ok is false when data is not a JSON object.
func decodeChunk(data []byte, c *wireChunk) bool {
	*c = wireChunk{}
	if len(data) == 0 || data[0] != '{' {
		return false
	}
	return json.Unmarshal(data, c) == nil
}

// text is the chunk's text: choices[0]'s text or content delta. vLLM bench serve reads only the
// first choice; the client asks for one.
func (c *wireChunk) text() string {
	if len(c.Choices) == 0 {
		return ""
	}
	ch := &c.Choices[0]
	switch {
	case ch.Text != nil:
		return *ch.Text
	case ch.Delta != nil && ch.Delta.Content != nil:
		return *ch.Delta.Content
	}
	return ""
}

// finish is the first non-empty finish reason among the choices (TGI sends "" until the end).
func (c *wireChunk) finish() string {
	for i := range c.Choices {
		if f := c.Choices[i].FinishReason; f != nil && *f != "" {
			return *f
		}
	}
	return ""
}

// errorMessage is the message of an error object in the chunk, and whether there is one.
func (c *wireChunk) errorMessage() (string, bool) {
	if len(c.Error) > 0 && !bytes.Equal(c.Error, []byte("null")) {
		var obj struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(c.Error, &obj) == nil && obj.Message != "":
			return obj.Message, true
		case json.Unmarshal(c.Error, &s) == nil:
			return s, true
		}
		return string(c.Error), true
	}
	if strings.EqualFold(c.Object, "error") {
		return c.Message, true
	}
	return "", false
}
