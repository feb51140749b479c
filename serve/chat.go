package serve

import (
	"encoding/json"
	"strings"
)

// chatMessage is one message of a chat request.
type chatMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"` // a string, a list of text parts, or null
	ToolCalls json.RawMessage `json:"tool_calls"`
}

// contentPart is one element of a list content; rosetop takes text parts, and an assistant's
// refusal parts (OpenAI's), whose text vLLM reads as a text part's.
type contentPart struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
}

// chatRoles are the roles the template knows.
func chatRole(role string) bool {
	switch role {
	case "system", "developer", "user", "assistant":
		return true
	}
	return false
}

// chatPrompt renders messages with rosetop's plain template for models without a chat template
// (GPT-2): one line per message, "role: content", then "assistant:" for the reply to follow:
//
//	system: You are terse.
//	user: Hello
//	assistant:
func chatPrompt(msgs []chatMessage) (string, *apiError) {
	if len(msgs) == 0 {
		return "", badRequest(chatPromptName, "", "messages must hold at least one message")
	}
	var b strings.Builder
	for i, m := range msgs {
		if !chatRole(m.Role) {
			return "", badRequest(chatPromptName, "", "messages[%d].role %q is not supported (system, developer, user or assistant)", i, m.Role)
		}
		if len(m.ToolCalls) > 0 && !isNull(m.ToolCalls) && string(m.ToolCalls) != "[]" {
			return "", badRequest(chatPromptName, "unsupported_parameter", "Unsupported parameter: messages[%d].tool_calls: rosetop has no tools", i)
		}
		text, e := messageText(i, m.Content)
		if e != nil {
			return "", e
		}
		b.WriteString(m.Role)
		b.WriteString(": ")
		b.WriteString(text)
		b.WriteByte('\n')
	}
	b.WriteString("assistant:")
	return b.String(), nil
}

// messageText reads a message's content: a string, a list of text and refusal parts (joined with
// newlines, as vLLM joins them for a template that takes a string), or null.
func messageText(i int, raw json.RawMessage) (string, *apiError) {
	if len(raw) == 0 || isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest(chatPromptName, "", "messages[%d].content must be a string or a list of text parts", i)
	}
	texts := make([]string, len(parts))
	for k, p := range parts {
		switch p.Type {
		case "text":
			texts[k] = p.Text
		case "refusal":
			texts[k] = p.Refusal
		default:
			return "", badRequest(chatPromptName, "", "messages[%d].content[%d].type %q is not supported (text or refusal only)", i, k, p.Type)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// parseChat validates a /v1/chat/completions body.
func parseChat(body []byte, m *Model) (*job, *apiError) {
	var r chatRequest
	if e := decodeBody(body, &r); e != nil {
		return nil, e
	}
	if r.Echo != nil && *r.Echo {
		// vLLM's chat echo puts the last message's content before the reply's when it is the
		// assistant's (and answers the prompt's logprobs at top_logprobs): not implemented.
		return nil, badRequest("echo", "unsupported_parameter",
			"Unsupported parameter: 'echo' is true; rosetop supports only null or false on /v1/chat/completions (echo is implemented on /v1/completions)")
	}
	// vLLM's ChatCompletionRequest.check_logprobs.
	if e := checkPromptLogprobs((*int)(r.PromptLogprobs), r.Stream != nil && *r.Stream); e != nil {
		return nil, e
	}
	if e := checkLogprobsSign("top_logprobs", r.TopLogprobs.v); e != nil {
		return nil, e
	}
	// vLLM samples with logprobs=top_logprobs when logprobs is true, and answers them only when
	// top_logprobs is not None: absent is its default 0, an explicit null answers none.
	logprobs := r.Logprobs != nil && *r.Logprobs && !(r.TopLogprobs.set && r.TopLogprobs.v == nil)
	if t := r.TopLogprobs.v; t != nil && (*t == -1 || *t > 0) && !(r.Logprobs != nil && *r.Logprobs) {
		return nil, badRequest("top_logprobs", "", "when using `top_logprobs`, `logprobs` must be set to true.")
	}
	if e := r.checkModel(m); e != nil {
		return nil, e
	}
	text, e := chatPrompt(r.Messages)
	if e != nil {
		return nil, e
	}
	prompt, e := encodePrompt(text, m, chatPromptName)
	if e != nil {
		return nil, e
	}
	maxTokens, maxParam := r.MaxTokens, "max_tokens"
	if r.MaxCompletionTokens != nil {
		maxTokens, maxParam = r.MaxCompletionTokens, "max_completion_tokens"
	}
	j := &job{chat: true}
	// Without max_tokens a chat reply may fill the context (vLLM's default).
	if e := r.build(j, m, [][]int32{prompt}, maxTokens, maxParam, m.MaxSeqLen-len(prompt)); e != nil {
		return nil, e
	}
	if logprobs {
		top := 0 // vLLM's default top_logprobs
		if r.TopLogprobs.v != nil {
			top = *r.TopLogprobs.v
		}
		if e := j.askLogprobs(top, m); e != nil {
			return nil, e
		}
	}
	// The prompt's logprobs go at the top of a whole reply (vLLM's ChatCompletionResponse).
	if e := j.askPromptLogprobs((*int)(r.PromptLogprobs), m); e != nil {
		return nil, e
	}
	return j, nil
}
