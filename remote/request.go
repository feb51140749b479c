package remote

import (
	"bytes"
	"encoding/json"
	"fmt"
	"rosetop/internal/oneline"
	"strings"
)

// API is the endpoint a request goes to.
type API int

// The OpenAI endpoints the client speaks.
const (
	Completions API = iota // POST {base}/completions, `prompt`, chunks carry choices[].text
	Chat                   // POST {base}/chat/completions, one user message, choices[].delta.content
)

// String is the API's name as the --api flag spells it.
func (a API) String() string {
	if a == Chat {
		return "chat"
	}
	return "completions"
}

// ParseAPI reads an API name: "completions" or "chat".
func ParseAPI(s string) (API, error) {
	switch s {
	case "completions":
		return Completions, nil
	case "chat":
		return Chat, nil
	}
	return 0, fmt.Errorf("%w: api %q: want completions or chat", ErrConfig, s)
}

// backend is the API as vLLM bench serve's results name their endpoint type.
func (a API) backend() string {
	if a == Chat {
		return "openai-chat"
	}
	return "openai"
}

func (a API) path() string {
	if a == Chat {
		return "/chat/completions"
	}
	return "/completions"
}

// Request is one generation. The zero sampling fields ask for greedy decoding (temperature 0)
// with the server's defaults for everything else.
type Request struct {
	API       API
	Model     string
	Prompt    string  // the prompt text (completions) or the user message (chat)
	PromptIDs []int32 // completions only: sent as an array of token ids instead of Prompt
	MaxTokens int     // max_tokens; must be at least 1

	// IgnoreEOS and MinTokens are vLLM and SGLang extensions, sent only when set.
	IgnoreEOS bool
	MinTokens int

	Temperature float64 // 0: greedy
	TopP        float64 // sent when > 0
	TopK        int     // sent when > 0 (an extension most servers accept)
	Seed        *int64  // sent when set
	// ContinuousUsage asks for usage on every chunk (stream_options.continuous_usage_stats,
	// vLLM and SGLang), which tells how many tokens each chunk carried.
	ContinuousUsage bool
}

// validate checks the fields the body depends on.
func (r *Request) validate() error {
	switch {
	case r.API != Completions && r.API != Chat:
		return fmt.Errorf("%w: request API %d", ErrConfig, int(r.API))
	case r.MaxTokens < 1:
		return fmt.Errorf("%w: max tokens %d: want at least 1", ErrConfig, r.MaxTokens)
	case r.MinTokens < 0 || r.MinTokens > r.MaxTokens:
		return fmt.Errorf("%w: min tokens %d: want 0..%d", ErrConfig, r.MinTokens, r.MaxTokens)
	case r.PromptIDs != nil && r.API == Chat:
		return fmt.Errorf("%w: token-id prompts need the completions API", ErrConfig)
	case r.Temperature < 0 || r.TopP < 0 || r.TopK < 0:
		return fmt.Errorf("%w: negative sampling parameter", ErrConfig)
	}
	return nil
}

// ExtraBody is a JSON object whose members are merged into every request body at the top level;
// a member replaces the client's own field of the same name. Build one with ParseExtraBody.
type ExtraBody struct {
	members map[string]json.RawMessage // immutable after ParseExtraBody
}

// ParseExtraBody reads --extra-body: it must be a JSON object, and may not set "stream" (the
// client only speaks streaming), the output length (the client bounds and counts a stream by
// the length it asked for: --max-new-tokens or the dataset's), nor more than one choice ("n",
// "best_of": the stream would carry each choice's tokens, all counted against one request), nor
// "echo" (its first chunk would carry the prompt's text and tokens as output).
func ParseExtraBody(s string) (ExtraBody, error) {
	if strings.TrimSpace(s) == "" {
		return ExtraBody{}, nil
	}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
		return ExtraBody{}, fmt.Errorf("%w: extra body %s: want one JSON object, like {\"top_k\": 1}",
			ErrConfig, oneline.Clip(s, 40))
	}
	if _, ok := m["stream"]; ok {
		return ExtraBody{}, fmt.Errorf("%w: extra body may not set \"stream\": the client streams", ErrConfig)
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		if _, ok := m[k]; ok {
			return ExtraBody{}, fmt.Errorf("%w: extra body may not set %q: give the output length with --max-new-tokens "+
				"(or the dataset's), which the client's stream bounds follow", ErrConfig, k)
		}
	}
	for _, k := range []string{"n", "best_of"} {
		if v, ok := m[k]; ok && !oneChoice(v) {
			return ExtraBody{}, fmt.Errorf("%w: extra body may not set %q to %s: the client reads one choice a request "+
				"(leave it out, or give 1)", ErrConfig, k, oneline.Clip(string(v), 20))
		}
	}
	if v, ok := m["echo"]; ok {
		var echo *bool
		if json.Unmarshal(v, &echo) != nil || echo != nil && *echo {
			return ExtraBody{}, fmt.Errorf("%w: extra body may not set \"echo\" to %s: the client counts a stream's text and tokens as "+
				"the output, which echo would lead with the prompt's (leave it out, or give false)", ErrConfig, oneline.Clip(string(v), 20))
		}
	}
	return ExtraBody{members: m}, nil
}

// oneChoice reports whether v, the value of "n" or "best_of", asks for one choice: 1 (1.0, 1e0)
// or null, the default.
func oneChoice(v json.RawMessage) bool {
	var f *float64
	return json.Unmarshal(v, &f) == nil && (f == nil || *f == 1)
}

// Len is the number of members.
func (e ExtraBody) Len() int { return len(e.members) }

// body builds the JSON request body: the request's fields, then extra's members over them.
func (r *Request) body(extra ExtraBody) ([]byte, error) {
	m := make(map[string]any, 12+len(extra.members))
	m["model"] = r.Model
	m["stream"] = true
	opts := map[string]bool{"include_usage": true}
	if r.ContinuousUsage {
		opts["continuous_usage_stats"] = true
	}
	m["stream_options"] = opts
	m["max_tokens"] = r.MaxTokens
	m["temperature"] = r.Temperature
	if r.API == Chat {
		m["messages"] = []map[string]string{{"role": "user", "content": r.Prompt}}
	} else if r.PromptIDs != nil {
		m["prompt"] = r.PromptIDs
	} else {
		m["prompt"] = r.Prompt
	}
	if r.IgnoreEOS {
		m["ignore_eos"] = true
	}
	if r.MinTokens > 0 {
		m["min_tokens"] = r.MinTokens
	}
	if r.TopP > 0 {
		m["top_p"] = r.TopP
	}
	if r.TopK > 0 {
		m["top_k"] = r.TopK
	}
	if r.Seed != nil {
		m["seed"] = *r.Seed
	}
	for k, v := range extra.members {
		m[k] = v
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("%w: request body: %v", ErrConfig, err)
	}
	return buf.Bytes(), nil
}
