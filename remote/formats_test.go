package remote

import (
	"errors"
	"strings"
	"testing"
)

// format is one server's stream, written from that server's source, and what the client must
// make of it.
type format struct {
	name   string
	source string // the file the chunk shapes come from
	api    API
	stream string
	// What the Result must say.
	tokens     []int // per chunk with choices (-1: unknown)
	text       string
	output     int
	from       TokenSource
	prompt     int
	finish     string
	keepAlives int
	reason     Reason // ReasonNone: success
	detail     string // a substring of Failure.Detail
}

var formats = []format{
	{
		name:   "vllm completions",
		source: "vllm/entrypoints/openai/completion/serving.py (completion_stream_generator: chunks dumped with exclude_unset, a final usage chunk with choices [] when include_usage, then [DONE])",
		api:    Completions,
		stream: `data: {"id":"cmpl-7f3a","object":"text_completion","created":1735689600,"model":"gpt2","choices":[{"index":0,"text":",","logprobs":null,"finish_reason":null,"stop_reason":null}]}

data: {"id":"cmpl-7f3a","object":"text_completion","created":1735689600,"model":"gpt2","choices":[{"index":0,"text":" I","logprobs":null,"finish_reason":null,"stop_reason":null}]}

data: {"id":"cmpl-7f3a","object":"text_completion","created":1735689600,"model":"gpt2","choices":[{"index":0,"text":"'m","logprobs":null,"finish_reason":"length","stop_reason":null}]}

data: {"id":"cmpl-7f3a","object":"text_completion","created":1735689600,"model":"gpt2","choices":[],"usage":{"prompt_tokens":1,"total_tokens":4,"completion_tokens":3}}

data: [DONE]

`,
		tokens: []int{-1, -1, -1}, text: ", I'm", output: 3, from: TokensUsage, prompt: 1, finish: "length",
	},
	{
		name:   "vllm completions multi-token chunks with token ids",
		source: "vllm/entrypoints/openai/completion/serving.py (return_token_ids puts the chunk's token_ids on each choice; several tokens per chunk under stream intervals or speculative decoding)",
		api:    Completions,
		stream: `data: {"id":"cmpl-9","object":"text_completion","created":1735689600,"model":"gpt2","choices":[{"index":0,"text":", I","logprobs":null,"finish_reason":null,"stop_reason":null,"token_ids":[11,314]}]}

data: {"id":"cmpl-9","object":"text_completion","created":1735689600,"model":"gpt2","choices":[{"index":0,"text":"'m not sure","logprobs":null,"finish_reason":null,"stop_reason":null,"token_ids":[1101,407,1654]}]}

data: {"id":"cmpl-9","object":"text_completion","created":1735689600,"model":"gpt2","choices":[{"index":0,"text":".","logprobs":null,"finish_reason":"length","stop_reason":null,"token_ids":[13]}]}

data: {"id":"cmpl-9","object":"text_completion","created":1735689600,"model":"gpt2","choices":[],"usage":{"prompt_tokens":1,"total_tokens":7,"completion_tokens":6}}

data: [DONE]

`,
		tokens: []int{2, 3, 1}, text: ", I'm not sure.", output: 6, from: TokensUsage, prompt: 1, finish: "length",
	},
	{
		name:   "vllm chat with continuous usage",
		source: "vllm/entrypoints/openai/chat_completion/serving.py (chat_completion_stream_generator: a role-only first chunk with content \"\", usage on every chunk under continuous_usage_stats, a final usage chunk)",
		api:    Chat,
		stream: `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"gpt2","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":5,"total_tokens":5,"completion_tokens":0}}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"gpt2","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":5,"total_tokens":6,"completion_tokens":1}}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"gpt2","choices":[{"index":0,"delta":{"content":" there!"},"logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3}}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"gpt2","choices":[],"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3}}

data: [DONE]

`,
		tokens: []int{0, 1, 2}, text: "Hi there!", output: 3, from: TokensUsage, prompt: 5, finish: "length",
	},
	{
		name:   "vllm chat error mid-stream",
		source: "vllm/entrypoints/openai/chat_completion/serving.py (an exception becomes data: create_streaming_error_response, an ErrorResponse {\"error\": {message, type, param, code}}, then [DONE])",
		api:    Chat,
		stream: `data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1735689600,"model":"gpt2","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1735689600,"model":"gpt2","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}

data: {"error": {"message": "EngineCore encountered an issue.", "type": "InternalServerError", "param": null, "code": 500}}

data: [DONE]

`,
		tokens: []int{-1, -1}, text: "Hi", reason: ReasonServerError, detail: "EngineCore encountered an issue.",
	},
	{
		name:   "sglang completions",
		source: "python/sglang/srt/entrypoints/openai/serving_completions.py (_generate_completion_stream: chunks dumped whole, so usage: null on each; the usage chunk with exclude_none)",
		api:    Completions,
		stream: `data: {"id":"5d1e","object":"text_completion","created":1735689600,"model":"default","choices":[{"index":0,"text":" Paris","logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}

data: {"id":"5d1e","object":"text_completion","created":1735689600,"model":"default","choices":[{"index":0,"text":".","logprobs":null,"finish_reason":"length","matched_stop":null}],"usage":null}

data: {"id":"5d1e","object":"text_completion","created":1735689600,"model":"default","choices":[],"usage":{"prompt_tokens":7,"total_tokens":9,"completion_tokens":2}}

data: [DONE]

`,
		tokens: []int{-1, -1}, text: " Paris.", output: 2, from: TokensUsage, prompt: 7, finish: "length",
	},
	{
		name:   "sglang chat",
		source: "python/sglang/srt/entrypoints/openai/serving_chat.py (_generate_chat_stream: a role chunk, content chunks, a separate finish chunk, a usage chunk with choices [])",
		api:    Chat,
		stream: `data: {"id":"8c2a","object":"chat.completion.chunk","created":1735689600,"model":"default","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}

data: {"id":"8c2a","object":"chat.completion.chunk","created":1735689600,"model":"default","choices":[{"index":0,"delta":{"role":null,"content":"Paris","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}

data: {"id":"8c2a","object":"chat.completion.chunk","created":1735689600,"model":"default","choices":[{"index":0,"delta":{"role":null,"content":null,"reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"stop","matched_stop":128009}],"usage":null}

data: {"id":"8c2a","object":"chat.completion.chunk","created":1735689600,"model":"default","choices":[],"usage":{"prompt_tokens":12,"total_tokens":14,"completion_tokens":2,"prompt_tokens_details":null,"reasoning_tokens":0}}

data: [DONE]

`,
		tokens: []int{-1, -1, -1}, text: "Paris", output: 2, from: TokensUsage, prompt: 12, finish: "stop",
	},
	{
		name:   "sglang chat with continuous usage",
		source: "python/sglang/srt/entrypoints/openai/serving_chat.py (_generate_chat_stream under continuous_usage_stats: usage on the content chunks only, none on the role chunk nor the finish chunk, so the role chunk's count is unknown and the finish chunk's none)",
		api:    Chat,
		stream: `data: {"id":"8c2b","object":"chat.completion.chunk","created":1735689600,"model":"default","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}

data: {"id":"8c2b","object":"chat.completion.chunk","created":1735689600,"model":"default","choices":[{"index":0,"delta":{"role":null,"content":"Paris","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":{"prompt_tokens":12,"total_tokens":13,"completion_tokens":1}}

data: {"id":"8c2b","object":"chat.completion.chunk","created":1735689600,"model":"default","choices":[{"index":0,"delta":{"role":null,"content":" is","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":{"prompt_tokens":12,"total_tokens":15,"completion_tokens":3}}

data: {"id":"8c2b","object":"chat.completion.chunk","created":1735689600,"model":"default","choices":[{"index":0,"delta":{"role":null,"content":null,"reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"length","matched_stop":null}],"usage":null}

data: {"id":"8c2b","object":"chat.completion.chunk","created":1735689600,"model":"default","choices":[],"usage":{"prompt_tokens":12,"total_tokens":15,"completion_tokens":3,"prompt_tokens_details":null,"reasoning_tokens":0}}

data: [DONE]

`,
		tokens: []int{-1, 1, 2, 0}, text: "Paris is", output: 3, from: TokensUsage, prompt: 12, finish: "length",
	},
	{
		name:   "sglang flat error object",
		source: "python/sglang/srt/entrypoints/openai/protocol.py (ErrorResponse: object \"error\", message, type, param, code, sent as a data field by create_streaming_error_response)",
		api:    Completions,
		stream: `data: {"id":"5d1f","object":"text_completion","created":1735689600,"model":"default","choices":[{"index":0,"text":" Paris","logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}

data: {"object":"error","message":"The request was aborted: KV cache pool is full.","type":"SERVICE_UNAVAILABLE","param":null,"code":503}

data: [DONE]

`,
		tokens: []int{-1}, text: " Paris", reason: ReasonServerError, detail: "KV cache pool is full",
	},
	{
		name:   "tgi completions with keep-alives",
		source: "router/src/server.rs (completions: Chunk with finish_reason \"\" until CompletionFinal, which carries the last token and usage; axum KeepAlive::default comments; [DONE])",
		api:    Completions,
		stream: `:

data: {"object":"text_completion","id":"","created":1735689600,"choices":[{"index":0,"text":" Paris","logprobs":null,"finish_reason":""}],"model":"gpt2","system_fingerprint":"3.3.4-native"}

:

data: {"object":"text_completion","id":"","created":1735689600,"choices":[{"index":0,"text":",","logprobs":null,"finish_reason":""}],"model":"gpt2","system_fingerprint":"3.3.4-native"}

data: {"object":"text_completion","id":"","created":1735689600,"model":"gpt2","system_fingerprint":"3.3.4-native","choices":[{"index":0,"text":" France","logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":4,"completion_tokens":3,"total_tokens":7}}

data: [DONE]

`,
		tokens: []int{-1, -1, -1}, text: " Paris, France", output: 3, from: TokensUsage, prompt: 4, finish: "length", keepAlives: 2,
	},
	{
		name:   "tgi chat",
		source: "router/src/chat.rs (ChatState::push: one chunk per token, each with role, then a usage chunk with choices [] when include_usage) and router/src/server.rs (chat_completions: [DONE])",
		api:    Chat,
		stream: `data: {"object":"chat.completion.chunk","id":"","created":1735689600,"model":"gpt2","system_fingerprint":"3.3.4-native","choices":[{"index":0,"delta":{"role":"assistant","content":"Deep"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"object":"chat.completion.chunk","id":"","created":1735689600,"model":"gpt2","system_fingerprint":"3.3.4-native","choices":[{"index":0,"delta":{"role":"assistant","content":" learning"},"logprobs":null,"finish_reason":"length"}],"usage":null}

data: {"object":"chat.completion.chunk","id":"","created":1735689600,"model":"gpt2","system_fingerprint":"3.3.4-native","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}

data: [DONE]

`,
		tokens: []int{-1, -1}, text: "Deep learning", output: 2, from: TokensUsage, prompt: 9, finish: "length",
	},
	{
		name:   "tgi error event",
		source: "router/src/infer/mod.rs (InferError::into_openai_event: {\"error\": {message, http_status_code: 422}})",
		api:    Chat,
		stream: `data: {"object":"chat.completion.chunk","id":"","created":1735689600,"model":"gpt2","system_fingerprint":"3.3.4-native","choices":[{"index":0,"delta":{"role":"assistant","content":"Deep"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"error":{"message":"Request failed during generation: Server error: CUDA out of memory","http_status_code":422}}

data: [DONE]

`,
		tokens: []int{-1}, text: "Deep", reason: ReasonServerError, detail: "CUDA out of memory",
	},
	{
		name:   "llama.cpp completions",
		source: "tools/server/server-task.cpp (server_task_result_cmpl_partial/final::to_json_oaicompat: nlohmann json, keys sorted; the final chunk carries finish_reason, empty text, usage and timings) and server-common.cpp (format_oai_sse)",
		api:    Completions,
		stream: `data: {"choices":[{"finish_reason":null,"index":0,"logprobs":null,"text":" Paris"}],"created":1735689600,"id":"chatcmpl-Xq","model":"gpt-3.5-turbo","object":"text_completion","system_fingerprint":"b6500-1a2b3c4"}

data: {"choices":[{"finish_reason":null,"index":0,"logprobs":null,"text":" is"}],"created":1735689600,"id":"chatcmpl-Xq","model":"gpt-3.5-turbo","object":"text_completion","system_fingerprint":"b6500-1a2b3c4"}

data: {"choices":[{"finish_reason":"length","index":0,"logprobs":null,"text":""}],"created":1735689600,"id":"chatcmpl-Xq","model":"gpt-3.5-turbo","object":"text_completion","system_fingerprint":"b6500-1a2b3c4","timings":{"prompt_n":4,"prompt_ms":12.1,"predicted_n":2,"predicted_ms":30.5},"usage":{"completion_tokens":2,"prompt_tokens":4,"prompt_tokens_details":{"cached_tokens":0},"total_tokens":6}}

data: [DONE]

`,
		tokens: []int{-1, -1, -1}, text: " Paris is", output: 2, from: TokensUsage, prompt: 4, finish: "length",
	},
	{
		name:   "llama.cpp chat",
		source: "tools/server/server-task.cpp (to_json_oaicompat_chat_stream: a role delta with content null before the first diff, an empty-delta finish chunk, then a usage chunk with choices [] and timings)",
		api:    Chat,
		stream: `data: {"choices":[{"delta":{"content":null,"role":"assistant"},"finish_reason":null,"index":0}],"created":1735689600,"id":"chatcmpl-Yr","model":"gpt-3.5-turbo","object":"chat.completion.chunk","system_fingerprint":"b6500-1a2b3c4"}

data: {"choices":[{"delta":{"content":"Hello"},"finish_reason":null,"index":0}],"created":1735689600,"id":"chatcmpl-Yr","model":"gpt-3.5-turbo","object":"chat.completion.chunk","system_fingerprint":"b6500-1a2b3c4"}

data: {"choices":[{"delta":{"content":"!"},"finish_reason":null,"index":0}],"created":1735689600,"id":"chatcmpl-Yr","model":"gpt-3.5-turbo","object":"chat.completion.chunk","system_fingerprint":"b6500-1a2b3c4"}

data: {"choices":[{"delta":{},"finish_reason":"stop","index":0}],"created":1735689600,"id":"chatcmpl-Yr","model":"gpt-3.5-turbo","object":"chat.completion.chunk","system_fingerprint":"b6500-1a2b3c4"}

data: {"choices":[],"created":1735689600,"id":"chatcmpl-Yr","model":"gpt-3.5-turbo","object":"chat.completion.chunk","system_fingerprint":"b6500-1a2b3c4","timings":{"prompt_n":9,"predicted_n":2},"usage":{"completion_tokens":2,"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":0},"total_tokens":11}}

data: [DONE]

`,
		tokens: []int{-1, -1, -1, -1}, text: "Hello!", output: 2, from: TokensUsage, prompt: 9, finish: "stop",
	},
	{
		name:   "llama.cpp error ends the stream",
		source: "tools/server/server.cpp (handle_completions_impl: an error result is sent as data: {\"error\": ...} and the stream ends without [DONE]) and server-common.cpp (format_error_response: code, message, type)",
		api:    Chat,
		stream: `data: {"choices":[{"delta":{"content":null,"role":"assistant"},"finish_reason":null,"index":0}],"created":1735689600,"id":"chatcmpl-Zs","model":"gpt-3.5-turbo","object":"chat.completion.chunk","system_fingerprint":"b6500-1a2b3c4"}

data: {"error":{"code":500,"message":"failed to decode the batch, n_ctx is full","type":"server_error"}}

`,
		tokens: []int{-1}, reason: ReasonServerError, detail: "n_ctx is full",
	},
	{
		name:   "ollama completions",
		source: "middleware/openai.go (CompleteWriter: with include_usage every chunk carries a zero usage, then a usage chunk with choices []; [DONE]) and openai/openai.go (ToCompleteChunk, CompletionChunk)",
		api:    Completions,
		stream: `data: {"id":"cmpl-412","object":"text_completion","created":1735689600,"choices":[{"text":"The","index":0,"finish_reason":null}],"model":"llama3.2","system_fingerprint":"fp_ollama","usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}

data: {"id":"cmpl-412","object":"text_completion","created":1735689600,"choices":[{"text":" sky","index":0,"finish_reason":null}],"model":"llama3.2","system_fingerprint":"fp_ollama","usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}

data: {"id":"cmpl-412","object":"text_completion","created":1735689600,"choices":[{"text":"","index":0,"finish_reason":"length"}],"model":"llama3.2","system_fingerprint":"fp_ollama","usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}

data: {"id":"cmpl-412","object":"text_completion","created":1735689600,"choices":[],"model":"llama3.2","system_fingerprint":"fp_ollama","usage":{"prompt_tokens":26,"completion_tokens":2,"total_tokens":28}}

data: [DONE]

`,
		tokens: []int{-1, -1, 0}, text: "The sky", output: 2, from: TokensUsage, prompt: 26, finish: "length",
	},
	{
		name:   "ollama chat",
		source: "middleware/openai.go (ChatWriter: the first chunk carries the role, then FinishChunk with an empty delta, then the usage chunk with choices []; [DONE]) and openai/openai.go (ChatCompletionChunk, Delta with omitempty)",
		api:    Chat,
		stream: `data: {"id":"chatcmpl-58","object":"chat.completion.chunk","created":1735689600,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"The"},"finish_reason":null}]}

data: {"id":"chatcmpl-58","object":"chat.completion.chunk","created":1735689600,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"content":" sky"},"finish_reason":null}]}

data: {"id":"chatcmpl-58","object":"chat.completion.chunk","created":1735689600,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: {"id":"chatcmpl-58","object":"chat.completion.chunk","created":1735689600,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":26,"completion_tokens":2,"total_tokens":28}}

data: [DONE]

`,
		tokens: []int{-1, -1, -1}, text: "The sky", output: 2, from: TokensUsage, prompt: 26, finish: "stop",
	},
}

// TestFormats runs every server's stream through the client, written one event per flush, one
// byte per flush, and with CRLF line ends: all three must read the same.
func TestFormats(t *testing.T) {
	for _, f := range formats {
		for _, mode := range []string{"events", "bytes", "crlf"} {
			t.Run(f.name+"/"+mode, func(t *testing.T) {
				var steps []step
				switch mode {
				case "events":
					steps = events(f.stream)
				case "bytes":
					steps = bytewise(f.stream)
				case "crlf":
					steps = events(strings.ReplaceAll(f.stream, "\n", "\r\n"))
				}
				srv := newScriptServer(t, nil, script{steps: steps})
				c := newTestClient(t, srv.URL, Config{})
				var live []Chunk
				res, err := do(t, c, request(f.api), func(ch Chunk) { live = append(live, ch) })
				checkFormat(t, f, res, err, live)
			})
		}
	}
}

func checkFormat(t *testing.T, f format, res Result, err error, live []Chunk) {
	t.Helper()
	if f.reason != ReasonNone {
		var fail *Failure
		if !errors.As(err, &fail) || fail.Reason != f.reason || !strings.Contains(fail.Detail, f.detail) {
			t.Fatalf("error %v, want reason %v with detail containing %q", err, f.reason, f.detail)
		}
	} else if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if len(res.Chunks) != len(f.tokens) || len(live) != len(f.tokens) {
		t.Fatalf("%d chunks recorded, %d reported live; want %d", len(res.Chunks), len(live), len(f.tokens))
	}
	var text strings.Builder
	for i, c := range res.Chunks {
		if c.Tokens != f.tokens[i] || live[i].Tokens != f.tokens[i] || live[i].At != c.At {
			t.Errorf("chunk %d: tokens %d (live %d), want %d", i, c.Tokens, live[i].Tokens, f.tokens[i])
		}
		text.WriteString(live[i].Text)
	}
	if res.Text != text.String() {
		t.Errorf("Result.Text %q, live texts join to %q", res.Text, text.String())
	}
	if f.reason != ReasonNone {
		return
	}
	if res.Text != f.text || res.Finish != f.finish || res.KeepAlives != f.keepAlives {
		t.Errorf("text %q finish %q keep-alives %d; want %q %q %d", res.Text, res.Finish, res.KeepAlives, f.text, f.finish, f.keepAlives)
	}
	if res.OutputTokens != f.output || res.Tokens != f.from || res.PromptTokens != f.prompt || res.UsageMissing {
		t.Errorf("output %d from %v, prompt %d, usage missing %v; want %d from %v, prompt %d",
			res.OutputTokens, res.Tokens, res.PromptTokens, res.UsageMissing, f.output, f.from, f.prompt)
	}
}

// statusBody is one server's answer to a request it refuses, written from that server's
// source, and the Failure.Detail the client must make of it.
type statusBody struct {
	name   string
	source string
	status int
	body   string
	detail string // Failure.Detail, exactly
}

var statusBodies = []statusBody{
	{
		name:   "vllm error object",
		source: "vllm/entrypoints/openai/serving_engine.py (_check_model: create_error_response, an ErrorResponse {\"error\": {message, type, param, code}})",
		status: 404,
		body:   `{"error":{"message":"The model ` + "`nosuch`" + ` does not exist.","type":"NotFoundError","param":"model","code":404}}`,
		detail: "The model `nosuch` does not exist.",
	},
	{
		name:   "vllm and sglang flat error",
		source: "python/sglang/srt/entrypoints/openai/protocol.py (ErrorResponse: object \"error\", message, type, param, code; early vLLM's has the same shape)",
		status: 400,
		body:   `{"object":"error","message":"Requested token count exceeds the model's maximum context length of 1024 tokens.","type":"BadRequestError","param":null,"code":400}`,
		detail: "Requested token count exceeds the model's maximum context length of 1024 tokens.",
	},
	{
		name:   "tgi error string",
		source: "router/src/server.rs (ErrorResponse {error, error_type}, 422 for a validation error)",
		status: 422,
		body:   `{"error":"Input validation error: ` + "`inputs`" + ` tokens + ` + "`max_new_tokens`" + ` must be <= 1024. Given: 1000 ` + "`inputs`" + ` tokens and 64 ` + "`max_new_tokens`" + `","error_type":"validation"}`,
		detail: "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 1024. Given: 1000 `inputs` tokens and 64 `max_new_tokens`",
	},
	{
		name:   "llama.cpp error object",
		source: "tools/server/server-common.cpp (format_error_response: code, message, type, sent under \"error\")",
		status: 400,
		body:   `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}`,
		detail: "the request exceeds the available context size, try increasing it",
	},
	{
		name:   "ollama error object",
		source: "openai/openai.go (NewError: ErrorResponse {\"error\": {message, type, param, code}})",
		status: 404,
		body:   `{"error":{"message":"model \"nosuch\" not found, try pulling it first","type":"api_error","param":null,"code":null}}`,
		detail: `model "nosuch" not found, try pulling it first`,
	},
	{
		name:   "message with a line break",
		source: "any server: a message is folded to one line",
		status: 500,
		body:   "{\"error\": {\"message\": \"engine died:\\nCUDA error\"}}\n",
		detail: "engine died: CUDA error",
	},
	{
		name:   "fastapi detail",
		source: "FastAPI's (Starlette's) default answer to a path the server does not route: {\"detail\": phrase} (vLLM, SGLang)",
		status: 404,
		body:   `{"detail":"Not Found"}`,
		detail: "Not Found",
	},
	{
		name:   "fastapi detail not a string",
		source: "FastAPI's default 422 lists its validation errors (vLLM and SGLang answer their own shape instead): the body says more",
		status: 422,
		body:   `{"detail":[{"type":"missing","loc":["body","model"],"msg":"Field required","input":{}}]}`,
		detail: `{"detail":[{"type":"missing","loc":["body","model"],"msg":"Field required","input":{}}]}`,
	},
	{
		name:   "json without an error object",
		source: "a JSON answer that holds no message",
		status: 500,
		body:   `{"status":"unhealthy"}`,
		detail: `{"status":"unhealthy"}`,
	},
	{
		name:   "empty message",
		source: "an error object that says nothing: the body says more",
		status: 503,
		body:   `{"object":"error","message":"","code":503}`,
		detail: `{"object":"error","message":"","code":503}`,
	},
	{
		name:   "plain text",
		source: "a proxy's or a framework's text answer",
		status: 502,
		body:   "Bad Gateway\n",
		detail: "Bad Gateway",
	},
	{
		name:   "json cut short",
		source: "a body that starts as an error object and is not one",
		status: 500,
		body:   `{"error":{"message":"oops"`,
		detail: `{"error":{"message":"oops"`,
	},
}

// TestStatusBodies: a refusal's detail is the server's error message where its body holds one,
// else the start of the body.
func TestStatusBodies(t *testing.T) {
	for _, sb := range statusBodies {
		t.Run(sb.name, func(t *testing.T) {
			srv := newScriptServer(t, nil, script{status: sb.status, header: map[string]string{"Content-Type": "application/json"}, steps: []step{{write: sb.body}}})
			c := newTestClient(t, srv.URL, Config{})
			_, err := do(t, c, request(Completions), nil)
			var f *Failure
			if !errors.As(err, &f) || f.Reason != ReasonStatus || f.Status != sb.status {
				t.Fatalf("error %v, want an http %d status failure", err, sb.status)
			}
			if f.Detail != sb.detail {
				t.Errorf("detail %q, want %q", f.Detail, sb.detail)
			}
		})
	}
}
