package serve

import (
	"net/http"

	"rosetop/engine/tokenizer"
)

// tokenizeRequest is POST /tokenize's body, vLLM's TokenizeCompletionRequest (prompt) or
// TokenizeChatRequest (messages, rendered as a chat completion renders them).
type tokenizeRequest struct {
	Model            *string       `json:"model"`
	Prompt           *string       `json:"prompt"`
	Messages         []chatMessage `json:"messages"`
	AddSpecialTokens *bool         `json:"add_special_tokens"` // GPT-2's tokenizer adds none either way
	ReturnTokenStrs  *bool         `json:"return_token_strs"`
}

// tokenizeResponse is vLLM's TokenizeResponse.
type tokenizeResponse struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []int32  `json:"tokens"`
	TokenStrs   []string `json:"token_strs"` // null unless return_token_strs
}

// detokenizeRequest is POST /detokenize's body, vLLM's DetokenizeRequest.
type detokenizeRequest struct {
	Model  *string  `json:"model"`
	Tokens []*int64 `json:"tokens"`
}

type detokenizeResponse struct {
	Prompt string `json:"prompt"`
}

// tokenize answers POST /tokenize as vLLM does: the prompt's ids (an empty prompt has none), or
// those of the chat prompt messages make, their count and the model's length limit; with
// return_token_strs each token as the vocabulary spells it ("Ġworld"). vllm bench serve asks
// it to check that its prompts have the lengths it meant.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request, _ *reqInfo) {
	s.answerJSON(w, r, s.tokenizeReply)
}

func (s *Server) tokenizeReply(body []byte) (any, *apiError) {
	var req tokenizeRequest
	if e := decodeBody(body, &req); e != nil {
		return nil, e
	}
	m := &s.model
	if e := (&common{Model: req.Model}).checkModel(m); e != nil {
		return nil, e
	}
	var ids []int32
	switch {
	case req.Prompt != nil:
		ids = m.Tokenizer.Encode(*req.Prompt)
	case req.Messages != nil:
		text, e := chatPrompt(req.Messages)
		if e != nil {
			return nil, e
		}
		ids = m.Tokenizer.Encode(text)
	default:
		return nil, badRequest("prompt", "", "a tokenize request needs a prompt (a string) or messages")
	}
	reply := tokenizeResponse{Count: len(ids), MaxModelLen: m.MaxSeqLen, Tokens: append([]int32{}, ids...)}
	if req.ReturnTokenStrs != nil && *req.ReturnTokenStrs {
		reply.TokenStrs = make([]string, len(ids))
		for i, id := range ids {
			reply.TokenStrs[i] = tokenizer.Spell(m.Tokenizer.TokenBytes(id))
		}
	}
	return reply, nil
}

// detokenize answers POST /detokenize as vLLM does: the text of the ids, special tokens
// included and bytes that make no character as U+FFFD (the tokenizer's decode).
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request, _ *reqInfo) {
	s.answerJSON(w, r, s.detokenizeReply)
}

func (s *Server) detokenizeReply(body []byte) (any, *apiError) {
	var req detokenizeRequest
	if e := decodeBody(body, &req); e != nil {
		return nil, e
	}
	m := &s.model
	if e := (&common{Model: req.Model}).checkModel(m); e != nil {
		return nil, e
	}
	if req.Tokens == nil {
		return nil, badRequest("tokens", "", "a detokenize request needs tokens (a list of token ids)")
	}
	st := tokenizer.NewStream(m.Tokenizer)
	var text []byte
	for i, p := range req.Tokens {
		switch {
		case p == nil:
			return nil, badRequest("tokens", "", "tokens[%d] is null", i)
		case *p < 0 || *p >= int64(m.VocabSize):
			return nil, badRequest("tokens", "", "tokens[%d] = %d is out of the vocabulary [0, %d)", i, *p, m.VocabSize)
		}
		text = append(text, st.Push(int32(*p))...)
	}
	return detokenizeResponse{Prompt: string(append(text, st.Flush()...))}, nil
}

// answerJSON answers a POST whose JSON body reply turns into a reply, or its error (a body
// that does not say it is JSON too, as vLLM's validate_json_request).
func (s *Server) answerJSON(w http.ResponseWriter, r *http.Request, reply func(body []byte) (any, *apiError)) {
	e := checkJSON(r)
	var body []byte
	if e == nil {
		body, e = s.readBody(w, r)
	}
	var v any
	if e == nil {
		v, e = reply(body)
	}
	if e != nil {
		s.writeError(w, e)
		return
	}
	s.writeJSON(w, http.StatusOK, v)
}
