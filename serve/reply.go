package serve

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// The JSON shapes of the replies, as OpenAI's API reference gives them (vLLM's
// vllm/entrypoints/openai/completion/protocol.py and chat_completion/protocol.py follow them).

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// reply is a whole reply or one chunk of a stream.
type reply struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []any  `json:"choices"` // completionChoice or chatChoice; [] in a stream's usage chunk
	// Usage: *usage; in a stream's chunks with include_usage JSON null (OpenAI: "All other chunks
	// will also include a usage field, but with a null value"), or the usage so far with vLLM's
	// continuous_usage_stats; nil: left out.
	Usage any `json:"usage,omitempty"`
	// vLLM's prompt_logprobs: a whole chat reply's (a completion carries them on its choice).
	PromptLogprobs promptLogprobs `json:"prompt_logprobs,omitempty"`
	// vLLM's return_token_ids: a chat reply's prompt ids (in a stream, on the role chunk); a
	// completion carries them on its choice.
	PromptTokenIDs []int32 `json:"prompt_token_ids,omitempty"`
}

// completionChoice is a /v1/completions choice, whole or a chunk's.
type completionChoice struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	Logprobs     any     `json:"logprobs"` // *completionLogprobs, or nil: null
	FinishReason *string `json:"finish_reason"`
	// vLLM's return_token_ids: the output ids (a chunk's own), and the prompt's (first chunk).
	TokenIDs []int32 `json:"token_ids,omitempty"`
	// vLLM's prompt_logprobs, of a whole reply's choice
	PromptLogprobs promptLogprobs `json:"prompt_logprobs,omitempty"`
	PromptTokenIDs []int32        `json:"prompt_token_ids,omitempty"`
}

// chatChoice is a /v1/chat/completions choice: Message in a whole reply, Delta in a chunk.
type chatChoice struct {
	Index        int          `json:"index"`
	Message      *chatContent `json:"message,omitempty"`
	Delta        *chatContent `json:"delta,omitempty"`
	Logprobs     any          `json:"logprobs"` // *chatLogprobs, or nil: null
	FinishReason *string      `json:"finish_reason"`
	TokenIDs     []int32      `json:"token_ids,omitempty"`
}

type chatContent struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// replier builds one request's replies: the fields every reply or chunk of it shares.
type replier struct {
	chat     bool
	id       string
	created  int64
	model    string
	tokenIDs bool // return_token_ids
}

func newReplier(j *job, model string, now time.Time) *replier {
	prefix := "cmpl-"
	if j.chat {
		prefix = "chatcmpl-"
	}
	return &replier{chat: j.chat, id: prefix + randomID(), created: now.Unix(), model: model, tokenIDs: j.tokenIDs}
}

// randomID is 32 hex digits, like vLLM's random_uuid.
func randomID() string {
	var b [16]byte
	rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

func (r *replier) object(chunk bool) string {
	switch {
	case r.chat && chunk:
		return "chat.completion.chunk"
	case r.chat:
		return "chat.completion"
	}
	return "text_completion"
}

// answer is one choice's whole answer.
type answer struct {
	text, finish   string
	tokens, prompt []int32
	logprobs       any            // *completionLogprobs or *chatLogprobs; nil: null
	promptLogprobs promptLogprobs // prompt_logprobs; nil: left out
}

// whole is the non-streaming reply: the choices in index order (a chat reply's prompt ids, one
// prompt's, go at the top).
func (r *replier) whole(as []answer, u *usage) *reply {
	out := &reply{ID: r.id, Object: r.object(false), Created: r.created, Model: r.model, Usage: u, Choices: make([]any, len(as))}
	for i, a := range as {
		tokens, prompt := a.tokens, a.prompt
		if !r.tokenIDs {
			tokens, prompt = nil, nil
		}
		if r.chat {
			out.Choices[i] = chatChoice{Index: i, Message: &chatContent{Role: "assistant", Content: &a.text}, Logprobs: a.logprobs,
				FinishReason: &a.finish, TokenIDs: tokens}
			out.PromptTokenIDs, out.PromptLogprobs = prompt, a.promptLogprobs
		} else {
			out.Choices[i] = completionChoice{Index: i, Text: a.text, Logprobs: a.logprobs, FinishReason: &a.finish,
				TokenIDs: tokens, PromptLogprobs: a.promptLogprobs, PromptTokenIDs: prompt}
		}
	}
	return out
}

// piece is what one chunk of a stream says of its choice.
type piece struct {
	text   string
	finish *string // on the choice's last chunk
	// role: a chat choice's first chunk, whose delta is {"role": "assistant", "content": ""}
	role           bool
	tokens, prompt []int32 // return_token_ids: the chunk's output ids; the prompt's, on a choice's first chunk
	logprobs       any     // the chunk's tokens' *completionLogprobs or *chatLogprobs; nil: null
}

// chunk is a stream's chunk carrying choice i's piece; u is its usage field.
func (r *replier) chunk(i int, p piece, u any) *reply {
	out := &reply{ID: r.id, Object: r.object(true), Created: r.created, Model: r.model, Usage: u}
	tokens, prompt := p.tokens, p.prompt
	if !r.tokenIDs {
		tokens, prompt = nil, nil
	}
	if r.chat {
		delta := &chatContent{}
		if p.role {
			delta.Role = "assistant"
		}
		if p.text != "" || p.role {
			delta.Content = &p.text
		}
		out.Choices = []any{chatChoice{Index: i, Delta: delta, Logprobs: p.logprobs, FinishReason: p.finish, TokenIDs: tokens}}
		out.PromptTokenIDs = prompt
	} else {
		out.Choices = []any{completionChoice{Index: i, Text: p.text, Logprobs: p.logprobs, FinishReason: p.finish,
			TokenIDs: tokens, PromptTokenIDs: prompt}}
	}
	return out
}

// usageChunk is the last chunk of a stream with include_usage: no choices, the usage.
func (r *replier) usageChunk(u *usage) *reply {
	return &reply{ID: r.id, Object: r.object(true), Created: r.created, Model: r.model, Choices: []any{}, Usage: u}
}
