package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"rosetop/engine"
	"rosetop/internal/jsonkind"
	"rosetop/sched"
)

// Limits of OpenAI's API that rosetop keeps, and its own bounds.
const (
	// maxStops bounds stop: OpenAI takes up to 4 strings, vLLM any number (clients written for
	// vLLM send more); every string is searched after every token.
	maxStops = 64
	// maxLoopStopBytes bounds the stop strings (their bytes in all) the scheduler's loop searches
	// after a request's every token: past it the handler alone matches them and stops the request
	// (Stream.Stop, a step or more later, its record then counting more tokens than the reply),
	// so that one request's stop strings cannot slow every step for all.
	maxLoopStopBytes     = 1024
	defaultCompletionMax = 16 // /v1/completions' max_tokens when absent (OpenAI's and vLLM's default)
	maxTemperature       = 2.0
	// maxChoices bounds a request's choices, its prompts times n: each is a request in the
	// scheduler, and a client's number must not size what the server allocates.
	maxChoices            = 128
	completionsPromptName = "prompt"
	chatPromptName        = "messages"
)

// common are the fields both endpoints share. Pointers tell an absent (or null) field from a zero.
type common struct {
	Model             *string         `json:"model"`
	MaxTokens         *int            `json:"max_tokens"`
	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	TopK              *int            `json:"top_k"`
	Seed              *int64          `json:"seed"`
	N                 *int            `json:"n"`
	BestOf            *int            `json:"best_of"`
	Stop              json.RawMessage `json:"stop"`
	StopTokenIDs      json.RawMessage `json:"stop_token_ids"` // vLLM's; read by parseStopIDs
	IncludeStopStr    *bool           `json:"include_stop_str_in_output"`
	Stream            *bool           `json:"stream"`
	StreamOptions     *streamOptions  `json:"stream_options"`
	IgnoreEOS         *bool           `json:"ignore_eos"`
	MinTokens         *int            `json:"min_tokens"`
	SkipSpecialTokens *bool           `json:"skip_special_tokens"`
	ReturnTokenIDs    *bool           `json:"return_token_ids"`
	// vLLM's return_tokens_as_token_ids: logprobs' tokens spelled "token_id:N"
	ReturnTokensAsTokenIDs *bool `json:"return_tokens_as_token_ids"`
	// vLLM's prompt_logprobs: each prompt token's logprobs with N alternatives (a whole reply's
	// prompt_logprobs field), as laxInt reads it
	PromptLogprobs *laxInt `json:"prompt_logprobs"`
}

// streamOptions are read as vLLM reads them: include_usage absent is true (its default once
// stream_options is given), null or false is false.
type streamOptions struct {
	IncludeUsage         optBool `json:"include_usage"`
	ContinuousUsageStats optBool `json:"continuous_usage_stats"` // vLLM's: usage on every chunk
	members              int     // the object's members, known or not: vLLM refuses any without stream
}

func (o *streamOptions) UnmarshalJSON(raw []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		return err
	}
	type plain streamOptions // the fields alone, without this method
	if err := json.Unmarshal(raw, (*plain)(o)); err != nil {
		return err
	}
	o.members = len(all)
	return nil
}

// optBool is a JSON boolean member that tells absent (set false) from null (set, v nil).
type optBool struct {
	set bool
	v   *bool
}

func (b *optBool) UnmarshalJSON(raw []byte) error {
	b.set = true
	return json.Unmarshal(raw, &b.v)
}

func (b optBool) isTrue() bool { return b.v != nil && *b.v }

// optInt is a JSON integer member that tells absent (set false) from null (set, v nil).
type optInt struct {
	set bool
	v   *int
}

func (n *optInt) UnmarshalJSON(raw []byte) error {
	n.set = true
	return json.Unmarshal(raw, &n.v)
}

type completionRequest struct {
	common
	Prompt   json.RawMessage `json:"prompt"`
	Logprobs *laxInt         `json:"logprobs"` // the top logprobs a token, 0..engine.MaxTopLogprobs
	Echo     *bool           `json:"echo"`
}

// laxInt is an integer member that also takes true and false, as 1 and 0: pydantic's lax mode
// reads a bool into an int field, so vLLM reads completions' "logprobs": false as 0.
type laxInt int

func (n *laxInt) UnmarshalJSON(raw []byte) error {
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		*n = 0
		if b {
			*n = 1
		}
		return nil
	}
	var i int
	if err := json.Unmarshal(raw, &i); err != nil {
		return err // an *json.UnmarshalTypeError, which the decoder names the field in
	}
	*n = laxInt(i)
	return nil
}

type chatRequest struct {
	common
	Messages            []chatMessage `json:"messages"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
	Logprobs            *bool         `json:"logprobs"`
	TopLogprobs         optInt        `json:"top_logprobs"`
	Echo                *bool         `json:"echo"`
}

// job is a validated request, ready to submit: its choices are n for each prompt, choice i the
// request req with prompt i / n's ids and the seed plus i % n (choice builds it).
type job struct {
	chat    bool
	req     sched.Request // the first choice's: Tokens, StopOnEOS, MinNewTokens, Sampling set
	prompts [][]int32     // the prompts' ids, at least one
	n       int           // choices a prompt (n), at least 1
	// firstOfPrompt: a choice's job that is its prompt's first (usage counts each prompt once)
	firstOfPrompt bool
	stops         []string // stop strings, each non-empty
	// stopIDs are stop_token_ids: sorted, unique, in the vocabulary. Read-only once parsed: a job's
	// choices share them, on their handlers' goroutines and the scheduler's loop.
	stopIDs     []int32
	includeStop bool // include_stop_str_in_output: the stop string, and the ending token's text, stay in the text
	stream      bool
	usage       bool // stream_options.include_usage
	continuous  bool // and continuous_usage_stats: usage on every chunk
	skipSpecial bool // leave EOS out of the text (skip_special_tokens, default true)
	tokenIDs    bool // return_token_ids: the ids in the reply
	// logprobs: every output token's logprobs in the reply (completions' logprobs set, chat's
	// logprobs true), with topLogprobs alternatives (completions' logprobs, chat's top_logprobs);
	// req asks the scheduler for them.
	logprobs    bool
	topLogprobs int
	tokensAsIDs bool // return_tokens_as_token_ids: logprobs spell tokens "token_id:N"
	// showPrompt: a whole reply with prompt_logprobs carries the prompt's raw logprobs; req asks
	// the scheduler for them (sched.Request.PromptLogprobs) then, and for echo's logprobs.
	showPrompt bool
	// echo (completions): each choice's text starts with its prompt's, echoTexts[p] for prompt p
	// ("" with return_token_ids, as vLLM); echoOnly: max_tokens 0, the prompt's text alone.
	echo, echoOnly bool
	echoTexts      []string
}

// choices is how many requests the job submits.
func (j *job) choices() int { return len(j.prompts) * j.n }

// choice is the job of choice i alone: its prompt, and a seed of its own so that n samples of
// one prompt differ (as vLLM's n draws them from one generator) and repeat with the seed.
func (j *job) choice(i int) *job {
	c := *j
	c.prompts, c.n = j.prompts[i/j.n:i/j.n+1], 1
	if j.echo {
		c.echoTexts = j.echoTexts[i/j.n : i/j.n+1]
	}
	c.req.Tokens = c.prompts[0]
	c.req.Sampling.Seed += uint64(i % j.n)
	c.firstOfPrompt = i%j.n == 0
	if !c.firstOfPrompt && !(j.echo && j.logprobs) {
		// prompt_logprobs alone: the prompt's first choice computes them for all its choices
		c.req.PromptLogprobs, c.req.PromptTopLogprobs = false, 0
	}
	return &c
}

// request is the scheduler request of choice job j: with stop strings (up to maxLoopStopBytes)
// or stop token ids, a fresh stopCheck of its own, so that the scheduler ends it at the token that
// completes a stop string or is a stop id. Other requests carry none and cost the scheduler's
// loop nothing.
func (j *job) request(m *Model) sched.Request {
	r := j.req
	loopStops := len(j.stops) > 0 && stopBytes(j.stops) <= maxLoopStopBytes
	if loopStops || len(j.stopIDs) > 0 {
		rule := newStopRule(j, m)
		if !loopStops {
			rule.detok = nil // stop ids alone: the loop needs no text
		}
		r.Stop = stopCheck{rule}
	}
	return r
}

// stopBytes is the stop strings' length in all.
func stopBytes(stops []string) int {
	n := 0
	for _, s := range stops {
		n += len(s)
	}
	return n
}

// promptParam is the field a prompt error names.
func (j *job) promptParam() string {
	if j.chat {
		return chatPromptName
	}
	return completionsPromptName
}

// decodeBody parses body into a JSON object's members and into v (a *completionRequest or
// *chatRequest), answering a 400 for malformed JSON, a wrongly typed field, or a field set to a
// value rosetop cannot honour.
func decodeBody(body []byte, v any) *apiError {
	if !utf8.Valid(body) { // encoding/json would read each bad byte as U+FFFD: another prompt
		return badRequest("", "", "the request body is not valid UTF-8 (byte %d): JSON text is UTF-8", invalidUTF8At(body))
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return badRequest("", "", "the request body must be a JSON object, not %s", te.Value)
		}
		return badRequest("", "", "malformed JSON: %v", err)
	}
	if members == nil {
		return badRequest("", "", "the request body must be a JSON object, not null")
	}
	if e := checkNeutral(members); e != nil {
		return e
	}
	if wholeInts(members, reflect.TypeOf(v).Elem()) {
		body, _ = json.Marshal(members) // members hold valid JSON: it cannot fail
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := strings.TrimPrefix(te.Field, "common.") // the embedded struct's fields are top-level
			return badRequest(field, "", "'%s' must be %s, got %s", field, jsonkind.Name(te.Type, te.Value), te.Value)
		}
		return badRequest("", "", "malformed JSON: %v", err)
	}
	return nil
}

// invalidUTF8At is the offset of b's first byte that does not start a valid UTF-8 sequence.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// wholeInts rewrites the members that hold t's integer fields (by JSON name, an embedded struct's
// too) and are whole numbers written with a fraction or an exponent (5.0, 2e0: Python's
// json.dumps of a float) as integers, as vLLM's pydantic models read them. It reports whether
// it rewrote any; a fraction, or a number past int64, is left for the decoder to refuse.
func wholeInts(members map[string]json.RawMessage, t reflect.Type) bool {
	rewrote := false
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			rewrote = wholeInts(members, f.Type) || rewrote
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		raw, ok := members[name]
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if !ok || ft.Kind() < reflect.Int || ft.Kind() > reflect.Int64 {
			continue
		}
		n := string(bytes.TrimSpace(raw))
		if !strings.ContainsAny(n, ".eE") || !jsonkind.IsWhole(n) {
			continue
		}
		if x, _ := strconv.ParseFloat(n, 64); x >= -(1<<63) && x < 1<<63 {
			members[name] = json.RawMessage(strconv.FormatInt(int64(x), 10))
			rewrote = true
		}
	}
	return rewrote
}

// build validates the common fields against the prompts (their ids, already checked) and fills
// j. maxTokens is the endpoint's max_tokens (nil: absent), maxParam its name and defaultMax its
// default.
func (c *common) build(j *job, m *Model, prompts [][]int32, maxTokens *int, maxParam string, defaultMax int) *apiError {
	var maxNew, minNew int
	for _, p := range prompts { // every prompt must leave room for max_tokens, as vLLM checks each
		var e *apiError
		if maxNew, minNew, e = c.lengths(j, m, len(p), maxTokens, maxParam, defaultMax); e != nil {
			return e
		}
	}
	j.prompts, j.n = prompts, 1
	if c.N != nil {
		if j.n = *c.N; j.n < 1 {
			return badRequest("n", "", "n must be at least 1, got %d", j.n)
		}
	}
	if k := j.choices(); j.n > maxChoices || k > maxChoices {
		return badRequest("n", "", "a request takes at most %d choices (prompts x n), got %d x %d", maxChoices, len(prompts), j.n)
	}
	// best_of = n returns the n it draws, as without it; more would be ranked by logprobs.
	if b := c.BestOf; b != nil && *b != j.n {
		return badRequest("best_of", "unsupported_parameter",
			"Unsupported parameter: 'best_of' is %d; rosetop supports only null or n (%d): it does not rank candidates", *b, j.n)
	}
	sp, e := c.sampling(m.VocabSize)
	if e != nil {
		return e
	}
	if j.stops, e = parseStop(c.Stop); e != nil {
		return e
	}
	if j.stopIDs, e = parseStopIDs(c.StopTokenIDs, m.VocabSize); e != nil {
		return e
	}
	j.includeStop = c.IncludeStopStr != nil && *c.IncludeStopStr
	j.stream = c.Stream != nil && *c.Stream
	if o := c.StreamOptions; o != nil {
		// vLLM refuses stream_options without stream only when they say something: {} passes.
		if !j.stream && o.members > 0 {
			return badRequest("stream_options", "", "stream_options can only be set when stream is true")
		}
		j.usage = j.stream && (!o.IncludeUsage.set || o.IncludeUsage.isTrue())
		j.continuous = j.usage && o.ContinuousUsageStats.isTrue()
	}
	j.skipSpecial = c.SkipSpecialTokens == nil || *c.SkipSpecialTokens
	j.tokenIDs = c.ReturnTokenIDs != nil && *c.ReturnTokenIDs
	j.tokensAsIDs = c.ReturnTokensAsTokenIDs != nil && *c.ReturnTokensAsTokenIDs
	j.req = sched.Request{
		Tokens: prompts[0], MaxNewTokens: maxNew, MinNewTokens: minNew,
		StopOnEOS: c.IgnoreEOS == nil || !*c.IgnoreEOS, Sampling: sp,
		StreamInterval: maxNew, // the server decodes text itself: the scheduler's only at the end
	}
	return nil
}

// lengths checks max_tokens and min_tokens against a prompt of n tokens and the context length.
func (c *common) lengths(j *job, m *Model, n int, maxTokens *int, maxParam string, defaultMax int) (maxNew, minNew int, e *apiError) {
	maxNew = defaultMax
	if maxTokens != nil {
		switch maxNew = *maxTokens; {
		case maxNew == 0 && j.echo:
			// vLLM's echo_without_generation: the prompt alone is answered, and one token is still
			// sampled (SamplingParams max_tokens=1), counted in usage.
			maxNew, j.echoOnly = 1, true
		case maxNew < 1:
			return 0, 0, badRequest(maxParam, "", "%s must be at least 1, got %d", maxParam, maxNew)
		}
	}
	// vLLM's two messages: the prompt alone leaves no room, or the completion asked for does not fit.
	switch room := m.MaxSeqLen - n; {
	case room < 1:
		p := j.promptParam()
		return 0, 0, badRequest(p, "context_length_exceeded",
			"This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the %s.",
			m.MaxSeqLen, n, p)
	case maxNew > room:
		return 0, 0, badRequest(maxParam, "context_length_exceeded",
			"'%s' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).",
			maxParam, maxNew, m.MaxSeqLen, n, maxNew, m.MaxSeqLen, n)
	}
	if c.MinTokens != nil {
		if minNew = *c.MinTokens; minNew < 0 || minNew > maxNew {
			return 0, 0, badRequest("min_tokens", "", "min_tokens must be in [0, max_tokens = %d], got %d", maxNew, minNew)
		}
	}
	return maxNew, minNew, nil
}

// checkModel answers 404 when the request names a model other than the one served; a request
// naming none (no model, null or "") gets the served one, as vLLM does.
func (c *common) checkModel(m *Model) *apiError {
	if c.Model == nil || *c.Model == "" || *c.Model == m.ID {
		return nil
	}
	return newAPIError(404, typeInvalid, "model", "model_not_found",
		"The model `%s` does not exist: this server serves `%s`.", *c.Model, m.ID)
}

// sampling maps temperature, top_p, top_k and seed onto the engine's parameters. Absent fields
// take OpenAI's defaults (temperature 1, top_p 1); without a seed each request draws its own.
// A top_k of the whole vocabulary or more is off (0): a backend may hold top-k in fewer bits
// than an int (the CUDA sampler's int32).
func (c *common) sampling(vocab int) (engine.SamplingParams, *apiError) {
	sp := engine.SamplingParams{Temperature: 1}
	if t := c.Temperature; t != nil {
		if math.IsNaN(*t) || *t < 0 || *t > maxTemperature {
			return sp, badRequest("temperature", "", "temperature must be in [0, %g], got %g", maxTemperature, *t)
		}
		sp.Temperature = float32(*t)
	}
	if p := c.TopP; p != nil {
		if math.IsNaN(*p) || *p <= 0 || *p > 1 {
			return sp, badRequest("top_p", "", "top_p must be in (0, 1], got %g", *p)
		}
		sp.TopP = engine.TopPOf(*p)
	}
	if k := c.TopK; k != nil {
		if *k < -1 {
			return sp, badRequest("top_k", "", "top_k must be -1 or 0 (off) or at least 1, got %d", *k)
		}
		if *k < vocab {
			sp.TopK = max(*k, 0)
		}
	}
	if c.Seed != nil {
		sp.Seed = uint64(*c.Seed)
	} else {
		sp.Seed = rand.Uint64()
	}
	return sp, nil
}

// parseStop reads stop: null, a string, or a list of up to maxStops strings, none empty.
func parseStop(raw json.RawMessage) ([]string, *apiError) {
	if len(raw) == 0 || isNull(raw) {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		raw = json.RawMessage(fmt.Sprintf("[%s]", raw))
	}
	var stops []string
	if err := json.Unmarshal(raw, &stops); err != nil {
		return nil, badRequest("stop", "", "stop must be a string or a list of strings")
	}
	if len(stops) > maxStops {
		return nil, badRequest("stop", "", "stop takes at most %d strings, got %d", maxStops, len(stops))
	}
	for _, s := range stops {
		if s == "" {
			return nil, badRequest("stop", "", "stop strings must not be empty")
		}
	}
	return stops, nil
}

// parseStopIDs reads stop_token_ids: null, or a list of integers (whole numbers written with a
// fraction or an exponent too, as pydantic reads them), each in [0, vocab) as vLLM's
// SamplingParams._validate_stop_token_ids requires. It returns them sorted, without repeats.
func parseStopIDs(raw json.RawMessage, vocab int) ([]int32, *apiError) {
	const param = "stop_token_ids"
	if len(raw) == 0 || isNull(raw) {
		return nil, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, badRequest(param, "", "stop_token_ids must be a list of integers")
	}
	ids := make([]int32, 0, len(elems))
	var bad []string // out of the vocabulary, once each in the order given (vLLM drops repeats first)
	seen := map[string]bool{}
	for i, el := range elems {
		n := string(bytes.TrimSpace(el))
		if n == "" || !(n[0] == '-' || n[0] >= '0' && n[0] <= '9') || !jsonkind.IsWhole(n) {
			return nil, badRequest(param, "", "stop_token_ids must be a list of integers, got %.40s at index %d", n, i)
		}
		x, _ := strconv.ParseFloat(n, 64)
		if x < 0 || x >= float64(vocab) {
			if math.Abs(x) < 1<<53 {
				n = strconv.FormatInt(int64(x), 10) // -2.0 is -2, as Python prints the int
			}
			if !seen[n] {
				seen[n] = true
				bad = append(bad, n)
			}
			continue
		}
		ids = append(ids, int32(x))
	}
	if len(bad) > 0 {
		return nil, badRequest(param, "", "token_id(s) [%s] in stop_token_ids contain out-of-vocab token ids. Vocabulary size: %d",
			strings.Join(bad, ", "), vocab)
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// parseCompletion validates a /v1/completions body.
func parseCompletion(body []byte, m *Model) (*job, *apiError) {
	var r completionRequest
	if e := decodeBody(body, &r); e != nil {
		return nil, e
	}
	logprobs, promptTop := (*int)(r.Logprobs), (*int)(r.PromptLogprobs)
	if e := checkPromptLogprobs(promptTop, r.Stream != nil && *r.Stream); e != nil {
		return nil, e
	}
	if e := checkLogprobsSign("logprobs", logprobs); e != nil {
		return nil, e
	}
	if e := r.checkModel(m); e != nil {
		return nil, e
	}
	prompts, e := completionPrompts(r.Prompt, m)
	if e != nil {
		return nil, e
	}
	j := &job{echo: r.Echo != nil && *r.Echo}
	if e := r.build(j, m, prompts, r.MaxTokens, "max_tokens", defaultCompletionMax); e != nil {
		return nil, e
	}
	if logprobs != nil {
		if e := j.askLogprobs(*logprobs, m); e != nil {
			return nil, e
		}
	}
	if promptTop == nil && j.echo { // vLLM's to_sampling_params: echo's prompt logprobs are logprobs'
		promptTop = logprobs
	}
	if e := j.askPromptLogprobs(promptTop, m); e != nil {
		return nil, e
	}
	if j.echo {
		j.echoTexts = echoTexts(r.Prompt, prompts, j.tokenIDs, m)
	}
	return j, nil
}

// checkLogprobsSign is vLLM's check_logprobs (CompletionRequest, ChatCompletionRequest): a count
// below 0 other than -1 (the whole vocabulary) is refused.
func checkLogprobsSign(param string, n *int) *apiError {
	if n != nil && *n < 0 && *n != -1 {
		return badRequest(param, "", "`%s` must be a positive value or -1.", param)
	}
	return nil
}

// checkPromptLogprobs is vLLM's check_logprobs for prompt_logprobs: above 0 (or -1) it is
// refused with stream, and below 0 unless -1.
func checkPromptLogprobs(n *int, stream bool) *apiError {
	const param = "prompt_logprobs"
	switch {
	case n == nil:
		return nil
	case stream && (*n > 0 || *n == -1):
		return badRequest(param, "", "`prompt_logprobs` are not available when `stream=True`.")
	case *n < 0 && *n != -1:
		return badRequest(param, "", "`prompt_logprobs` must be a positive value or -1.")
	}
	return nil
}

// askPromptLogprobs sets vLLM's SamplingParams prompt_logprobs, top alternatives a prompt token
// (nil: none; -1, the whole vocabulary, or more than max_logprobs is refused with
// _validate_logprobs' message). A whole reply carries them in its prompt_logprobs field, as
// vLLM's does whenever its request computes them (the field given, or echo with logprobs); the
// scheduler is asked for them only where the reply shows them: that field, or echo's logprobs.
func (j *job) askPromptLogprobs(top *int, m *Model) *apiError {
	if top == nil {
		return nil
	}
	n := *top
	if n == -1 {
		n = m.VocabSize
	}
	if n > engine.MaxTopLogprobs {
		return badRequest("prompt_logprobs", "", "Requested prompt logprobs of %d, which is greater than max allowed: %d", n, engine.MaxTopLogprobs)
	}
	j.showPrompt = !j.stream
	if j.showPrompt || j.echo && j.logprobs {
		j.req.PromptLogprobs, j.req.PromptTopLogprobs = true, n
	}
	return nil
}

// askLogprobs sets the job to answer each output token's logprobs with top alternatives, as
// vLLM's SamplingParams logprobs: -1 is the whole vocabulary, and more than its max_logprobs
// (engine.MaxTopLogprobs) is refused (_validate_logprobs' message).
func (j *job) askLogprobs(top int, m *Model) *apiError {
	n := top
	if n == -1 {
		n = m.VocabSize
	}
	if n > engine.MaxTopLogprobs {
		return badRequest("logprobs", "", "Requested sample logprobs of %d, which is greater than max allowed: %d", n, engine.MaxTopLogprobs)
	}
	j.logprobs, j.topLogprobs = true, n
	j.req.Logprobs, j.req.TopLogprobs = true, n
	return nil
}

// echoTexts are the prompts' texts that echo puts before each choice's: a text prompt as sent,
// token ids decoded (special tokens included, as vLLM detokenizes them); all "" with
// return_token_ids, as vLLM's echo leaves the text out then.
func echoTexts(raw json.RawMessage, prompts [][]int32, tokenIDs bool, m *Model) []string {
	texts := make([]string, len(prompts))
	if tokenIDs {
		return texts
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) == len(prompts) {
		return many
	}
	for i, p := range prompts {
		texts[i] = decodeIDs(m.Tokenizer, p)
	}
	return texts
}

// completionPrompts reads prompt: a string, a list of token ids, or a batch: a list of strings or
// a list of lists of token ids (OpenAI's four forms, as vLLM takes them; LangChain sends batches).
// Token ids decode through pointers: encoding/json reads a null element into an int as 0, a token
// the client never sent.
func completionPrompts(raw json.RawMessage, m *Model) ([][]int32, *apiError) {
	if len(raw) == 0 || isNull(raw) {
		return nil, badRequest(completionsPromptName, "", "prompt is required")
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		p, e := encodePrompt(text, m, completionsPromptName)
		return [][]int32{p}, e
	}
	var ids []*int64
	if err := json.Unmarshal(raw, &ids); err == nil {
		p, e := checkIDs(ids, m, "")
		return [][]int32{p}, e
	}
	var texts []string
	if err := json.Unmarshal(raw, &texts); err == nil && len(texts) > 0 {
		return eachPrompt(texts, func(which string, t string) ([]int32, *apiError) {
			p, e := encodePrompt(t, m, completionsPromptName)
			if e != nil {
				e.Message = which + e.Message
			}
			return p, e
		})
	}
	var lists [][]*int64
	if err := json.Unmarshal(raw, &lists); err == nil && len(lists) > 0 {
		return eachPrompt(lists, func(which string, l []*int64) ([]int32, *apiError) { return checkIDs(l, m, which) })
	}
	return nil, badRequest(completionsPromptName, "", "prompt must be a string, a list of token ids, a list of strings or a list of lists of token ids")
}

// eachPrompt reads a batch's prompts with read, which gets the words that name the prompt in an
// error ("prompt 2 of 5: "; "" in a batch of one).
func eachPrompt[T any](items []T, read func(which string, it T) ([]int32, *apiError)) ([][]int32, *apiError) {
	if len(items) > maxChoices {
		return nil, badRequest(completionsPromptName, "", "a request takes at most %d prompts, got %d", maxChoices, len(items))
	}
	out := make([][]int32, len(items))
	for i, it := range items {
		which := ""
		if len(items) > 1 {
			which = fmt.Sprintf("prompt %d of %d: ", i, len(items))
		}
		var e *apiError
		if out[i], e = read(which, it); e != nil {
			return nil, e
		}
	}
	return out, nil
}

// checkIDs validates a prompt of token ids; which prefixes its errors.
func checkIDs(ids []*int64, m *Model, which string) ([]int32, *apiError) {
	if len(ids) == 0 {
		return nil, badRequest(completionsPromptName, "", "%sprompt is an empty list of token ids", which)
	}
	out := make([]int32, len(ids))
	for i, p := range ids {
		if p == nil {
			return nil, badRequest(completionsPromptName, "", "%sprompt token id at index %d is null", which, i)
		}
		if id := *p; id < 0 || id >= int64(m.VocabSize) {
			return nil, badRequest(completionsPromptName, "", "%sprompt token id %d at index %d is out of the vocabulary [0, %d)", which, id, i, m.VocabSize)
		}
		out[i] = int32(*p)
	}
	return out, nil
}

// encodePrompt tokenizes a text prompt; an empty one is a 400.
func encodePrompt(text string, m *Model, param string) ([]int32, *apiError) {
	if text == "" {
		return nil, badRequest(param, "", "the prompt is empty")
	}
	ids := m.Tokenizer.Encode(text)
	if len(ids) == 0 {
		return nil, badRequest(param, "", "the prompt has no tokens")
	}
	return ids, nil
}
