// Package serve puts rosetop's engine behind OpenAI's HTTP API, with Prometheus metrics.
//
// Endpoints:
//
//	POST /v1/completions        prompt: a string, token ids, or a batch: a list of strings or of
//	                            lists of token ids (at most 128 prompts)
//	POST /v1/chat/completions   messages: system, developer, user and assistant; text content
//	                            (a string, or text and refusal parts)
//	GET  /v1/models             the served model (vLLM's max_model_len included)
//	POST /tokenize              vLLM's: a prompt's ids (or messages' as chat renders them), their
//	                            count and max_model_len; return_token_strs: the tokens spelled
//	POST /detokenize            vLLM's: the text of a list of token ids
//	GET  /health                200 with an empty body; 503 once shutting down
//	GET, POST /ping             SageMaker's probe, as /health (vLLM's)
//	GET  /version               {"version": ...}, the build's (vLLM's)
//	GET  /metrics               Prometheus text format (Metrics)
//
// Replies follow OpenAI's API reference, as vLLM implements it: a whole reply with usage, or with
// "stream": true Server-Sent Events, each "data: {json}\n\n" flushed as it is written, a chunk per
// scheduler step that sampled a token (chat: a first chunk with the role), the last of them with
// finish_reason ("length", or "stop" for EOS, stop strings and stop token ids), with
// stream_options.include_usage a usage chunk with "choices": [] ("usage": null in the others, or
// the usage so far with vLLM's continuous_usage_stats), and "data: [DONE]\n\n". As in vLLM,
// include_usage is true when stream_options is given without it (false or null turn it off);
// continuous_usage_stats needs it.
//
// n choices for each prompt (at most 128 choices a request) are choice p*n + k for prompt p's
// k-th, as in vLLM: each a request of its own in the scheduler (with a seed, sample k uses seed +
// k), counted as such by Options.MaxQueue; a stream interleaves their chunks (each with its
// index, a chat choice's first its role chunk) as their tokens come; usage counts each prompt
// once and every choice's output. An error in one ends them all.
//
// Parameters: max_tokens (completions: default 16; chat: max_completion_tokens first, default the
// rest of the context), temperature (default 1; 0 is greedy), top_p, top_k (-1 or 0: off), seed
// (absent: a random one per request), stop (a string or up to 64, as vLLM takes more than
// OpenAI's 4), stream, stream_options, n, logprobs (completions: an integer; chat: true, with
// top_logprobs), echo (completions), and vLLM's ignore_eos, min_tokens, skip_special_tokens,
// return_token_ids, return_tokens_as_token_ids, prompt_logprobs, stop_token_ids (ids in the
// vocabulary, else a 400 listing those outside it, as vLLM's) and include_stop_str_in_output.
// Fields that would change the result and that rosetop does not implement (best_of, chat's echo, suffix,
// logit_bias, penalties, tools, tool_choice, response_format, ...) get a 400 naming the field
// unless they hold their neutral value (best_of: n; tool_choice: "none", as vLLM also refuses any
// other without tools); other unknown fields are ignored, as vLLM ignores them. An integer may be
// written as a whole number with a fraction or an exponent (5.0, 1e3), as vLLM's pydantic models
// read it.
//
// Semantics worth knowing:
//   - Logprobs are vLLM's: each output token's log-softmax of the raw logits (before temperature,
//     top-k, top-p), the request asking the scheduler for them (sched.Request.Logprobs). A choice
//     answers those of every token usage counts (a stop string cuts the text, not them; a stream
//     sends each chunk's tokens'). Completions' logprobs N (0..20, false and true as 0 and 1; as
//     in vLLM, -1, the whole vocabulary, or more than its max_logprobs 20 is a 400): tokens,
//     token_logprobs, top_logprobs (an object from token text to logprob: the sampled token and
//     the N most likely, tokens of one text one key) and text_offset (code points, from the text
//     sent before in a stream). Chat's logprobs true, top_logprobs N (default 0; set only with
//     logprobs true): content, each token with its logprob, its text's UTF-8 bytes and
//     top_logprobs, the first N of the sampled token and the most likely. A token is decoded
//     alone (special tokens spelled out); one that is part of a character is decoded as vLLM
//     does, with the token before it, else "". -inf is -9999; return_tokens_as_token_ids spells
//     tokens "token_id:N".
//   - echo (completions) puts each prompt's text (token ids decoded) before its choices' text (a
//     stream: in each choice's first chunk), none with return_token_ids, as vLLM; with
//     max_tokens 0 the reply is the prompt alone (one token is still sampled and counted, as in
//     vLLM). With logprobs, a choice's logprobs (a stream's first chunk's) start with the prompt's
//     tokens, as vLLM's: the first with null token_logprobs and top_logprobs (it has no context),
//     each other its logprob given the tokens before it with prompt_logprobs' (else logprobs')
//     alternatives, text_offset counting from the prompt's start; max_tokens 0 answers the
//     prompt's alone. This is how lm-evaluation-harness scores text (echo, logprobs 1, max_tokens 0
//     or 1, token_logprobs[ctxlen:]). The scheduler computes them (sched.Request.PromptLogprobs)
//     over the whole prompt, sharing no cached prefix.
//   - prompt_logprobs N (vLLM's, 0..20: -1, the whole vocabulary, or more than 20 is a 400 with
//     vLLM's max_logprobs message; above 0 with stream a 400 too): a whole reply's
//     prompt_logprobs, on each completion choice, at the top of a chat reply: null for the first
//     prompt token, then for each an object from token id to {"logprob", "rank",
//     "decoded_token"}, the prompt token first (its rank in the whole vocabulary, 1 the most
//     likely), then the N most likely; -inf is -9999. A whole reply with echo and logprobs carries
//     it too (vLLM computes them for echo). A stream never carries it.
//   - Stop strings are matched on the server, as vLLM does: after each token in the new text and
//     the stop string's length - 1 bytes before it; the first listed stop string found there wins,
//     the text is cut before it (after it with
//     include_stop_str_in_output), and the reply's usage counts the tokens up to the one that
//     completed the match. The scheduler runs the same match for requests with stop strings
//     (sched.Request.Stop; up to 1 KiB of them in all, past which the handler alone matches and
//     stops the request a step or more later) and ends the request at that token, so its record says what the reply
//     says: "stop" in the metrics (on the last token max_tokens allows too, as in vLLM), no token
//     sampled after it. A stream holds back the last (longest stop - 1) bytes until they cannot
//     start a stop string; with include_stop_str_in_output it holds nothing back.
//   - stop_token_ids: a sampled stop id ends the request at that token with "stop", in the
//     scheduler too (sched.Request.Stop: its record and the metrics say stop, on the last allowed
//     token as well, as vLLM's check_stop looks before the length); it counts in
//     completion_tokens and adds no text unless include_stop_str_in_output. EOS listed is one
//     under ignore_eos.
//   - min_tokens: an EOS or stop id among the first min_tokens outputs does not end the request
//     and stays among the tokens (vLLM masks their logits instead, so its outputs differ there);
//     an EOS's text is dropped with skip_special_tokens (the default). As in vLLM, stop strings
//     are looked for only once the output holds more than min_tokens tokens.
//   - The EOS that ends a request counts in completion_tokens and adds no text, unless
//     include_stop_str_in_output and not skip_special_tokens ("<|endoftext|>").
//
// GPT-2 has no chat template; rosetop renders messages as plain role-prefixed lines and asks for
// the assistant's turn:
//
//	system: You are terse.
//	user: Hello
//	assistant:
//
// Errors are OpenAI's error object, {"error": {"message", "type", "param", "code"}}: 400
// (a Content-Type other than application/json, as vLLM; malformed JSON or a body that is not
// UTF-8, a bad or unsupported field, a prompt over the context length: code
// context_length_exceeded, param prompt or messages), 404 (unknown model or path), 405 (with
// Allow), 413 (body over Options.MaxBodyBytes), 429 (with Retry-After, where the request's
// choices would queue past Options.MaxQueue waiting requests), 503 (shutting down), 500 (the engine failed). After a stream has begun, an
// error is sent as an event holding the error object, then [DONE].
//
// A client that disconnects cancels its request at once (Stream.Cancel): its KV blocks return at
// the next scheduler step. The engine never waits for a client: a request's events queue in its
// Stream (one a step at most) while its handler writes, and a client that takes no write for
// Options.WriteTimeout is cut off and its request cancelled. Every reply's writes and every
// request's reading have a deadline (Options.WriteTimeout, Options.ReadTimeout); connections are
// not limited in number, as in vLLM, while Options.MaxQueue bounds the requests waiting.
// Server.Serve shuts down gracefully: it stops accepting when its context ends, lets requests in
// flight finish within Options.ShutdownTimeout, then cancels the rest (a 503, or an error event
// and [DONE] in a stream), closing a second later the connections that do not take that end.
//
// The package serves any Engine: a running rosetop session provides one (Submit, Waiting, Model;
// its scheduler runs each request's sched.Request.Stop, set for stop strings and stop ids only)
// and feeds Metrics.ObserveStep with every scheduler step.
package serve
