package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"rosetop/sched"
)

// Why a generation ended without a reply to give.
var (
	errCancelled = errors.New("the request was cancelled by the server")
	errEngine    = errors.New("the engine failed")
)

// generation follows one submitted request and turns its events into the text the client sees:
// the tokens decoded (EOS left out as the options say), cut at the first stop string, ended at a
// stop token id.
// It belongs to the request's handler goroutine.
type generation struct {
	j       *job
	st      Stream
	rule    *stopRule
	tokens  []int32       // output ids the client is answered with (those up to a stop match)
	lps     []lpPosition  // with logprobs: tokens[i]'s logprobs (vLLM returns those of every token in tokens)
	lpdec   *lpDecoder    // with logprobs: decodes the tokens' and alternatives' texts; else nil
	tok     Tokenizer     // decodes the prompt's logprobs
	finish  string        // finish_reason once done ("length", "stop"); for the log, "cancelled" or "error"
	rec     *sched.Record // the finished record, once seen
	first   *sched.Times  // the times the first token event carried (sched.Event.First): its TTFT, record or not
	matched bool          // a stop string or stop id ended the text before the finished event was read (drain reads it)
	// prompt: with prompt logprobs asked (req.PromptLogprobs), the prompt's positions, the first
	// unscored; set by the request's first token event, which carries them.
	prompt []lpPosition
}

func newGeneration(j *job, st Stream, m *Model) *generation {
	g := &generation{j: j, st: st, rule: newStopRule(j, m), tok: m.Tokenizer}
	if j.logprobs {
		g.lpdec = newLPDecoder(m.Tokenizer)
	}
	return g
}

// next reads the request's next event and returns the text that can be sent after it; done says
// the request ended (finish is set). Tokens that end the request (max tokens, EOS, a stop string
// or stop id) come with its end, as vLLM sends the finish reason with the last token: the
// scheduler emits the finished event right after them (a stop string's and a stop id's too: the
// job's stopCheck ends the request at that token). After a stop string or stop id next returns
// at once; drain reads the finished event. Errors: ctx's, errCancelled, errEngine, or one
// wrapping sched.ErrClosed.
func (g *generation) next(ctx context.Context) (text string, done bool, err error) {
	ev, err := g.read(ctx)
	if err != nil {
		return "", false, err
	}
	if ev.Kind == sched.EventFinished {
		return g.finished(ev.Record)
	}
	if g.lpdec != nil && len(ev.Logprobs) != len(ev.Tokens) {
		g.st.Cancel() // the reply cannot be given: the request need not run on
		return "", false, fmt.Errorf("%w: %d tokens came with %d logprobs", errEngine, len(ev.Tokens), len(ev.Logprobs))
	}
	if g.j.req.PromptLogprobs && g.prompt == nil {
		if err := g.takePrompt(ev); err != nil {
			g.st.Cancel()
			return "", false, err
		}
	}
	last := false // the tokens end the request: its finished event follows
	for i, t := range ev.Tokens {
		g.tokens = append(g.tokens, t)
		if g.lpdec != nil {
			g.lps = append(g.lps, g.lpdec.position(ev.Logprobs[i]))
		}
		switch g.rule.push(t) {
		case endEOS:
			last = true
		case endStop:
			g.rule.flush() // a stop id ends the request as an EOS does: a character left unfinished ends the text
			g.finish, g.matched = "stop", true
			return g.rule.text.take(true), true, nil
		}
	}
	if !last && len(g.tokens) < g.j.req.MaxNewTokens {
		return g.rule.text.take(false), false, nil
	}
	if ev, err = g.read(ctx); err != nil {
		return "", false, err
	}
	if ev.Kind != sched.EventFinished {
		return "", true, fmt.Errorf("%w: tokens after the last one", errEngine)
	}
	return g.finished(ev.Record)
}

// takePrompt keeps the prompt's logprobs, which the request's first token event carries: one
// entry for each prompt token after the first, that token's.
func (g *generation) takePrompt(ev sched.Event) error {
	prompt := g.j.req.Tokens
	if len(ev.PromptLogprobs) != len(prompt)-1 {
		return fmt.Errorf("%w: a prompt of %d tokens came with %d prompt logprobs", errEngine, len(prompt), len(ev.PromptLogprobs))
	}
	for k, x := range ev.PromptLogprobs {
		if x.Sampled.Token != prompt[k+1] {
			return fmt.Errorf("%w: prompt logprobs %d are token %d's, not the prompt's %d", errEngine, k, x.Sampled.Token, prompt[k+1])
		}
	}
	var first *int32 // vLLM corrects a prompt's partial characters with its output logprobs' first token
	if g.lpdec != nil && len(ev.Tokens) > 0 {
		first = &ev.Tokens[0]
	}
	g.prompt = promptPositions(g.tok, prompt, ev.PromptLogprobs, first)
	return nil
}

// read returns the request's next event; an end of events without a finish, or a finished event
// without a record, is an error wrapping sched.ErrClosed.
func (g *generation) read(ctx context.Context) (sched.Event, error) {
	ev, err := g.st.Next(ctx)
	if err == nil && ev.First != nil && g.first == nil {
		g.first = ev.First
	}
	switch {
	case errors.Is(err, io.EOF):
		return ev, fmt.Errorf("%w: the request's events ended without a finish", sched.ErrClosed)
	case err == nil && ev.Kind == sched.EventFinished && ev.Record == nil:
		return ev, fmt.Errorf("%w: a finished event without a record", sched.ErrClosed)
	}
	return ev, err
}

// finished handles the request's finished event.
func (g *generation) finished(rec *sched.Record) (string, bool, error) {
	g.rec = rec
	switch rec.Reason {
	case sched.FinishLength:
		g.finish = "length"
	case sched.FinishEOS, sched.FinishStop:
		g.finish = "stop"
	case sched.FinishCancelled:
		return "", true, errCancelled
	case sched.FinishError:
		if errors.Is(rec.Err, sched.ErrClosed) { // the engine stopped under the request
			return "", true, fmt.Errorf("the request was ended: %w", rec.Err)
		}
		return "", true, fmt.Errorf("%w: %v", errEngine, rec.Err)
	default:
		return "", true, fmt.Errorf("%w: %s: %v", errEngine, rec.Reason, rec.Err)
	}
	if g.rule.flush() {
		g.finish = "stop"
	}
	return g.rule.text.take(true), true, nil
}

// drain reads the rest of a request that a stop string or stop id ended (matched), until its
// finished event, so that the request has left the scheduler when the handler returns. The
// scheduler ends it at that token (stopCheck), so the finished event is next; an engine that does
// not run the check and samples on is stopped here (Stream.Stop), its record then counting more
// tokens than the reply.
func (g *generation) drain(ctx context.Context) {
	stopped := false
	for {
		ev, err := g.st.Next(ctx)
		if err != nil {
			return
		}
		switch {
		case ev.Kind == sched.EventFinished:
			g.rec = ev.Record
		case !stopped:
			g.st.Stop()
			stopped = true
		}
	}
}

// gone cancels the request of a client that has gone (or of a shutdown).
func (g *generation) gone() {
	g.st.Cancel()
	g.finish = "cancelled"
}

// logprobsOf is the reply's logprobs of the output tokens of ps, nil without logprobs; offset is
// a completion's text_offset of the first of them (vLLM's initial_text_offset). With echo, prompt
// (the prompt's positions, given with a choice's first chunk or whole text) come first, as in
// vLLM; with max_tokens 0 they alone.
func (g *generation) logprobsOf(prompt, ps []lpPosition, offset int) any {
	switch j := g.j; {
	case !j.logprobs:
		return nil
	case j.chat:
		return chatLogprobsOf(ps, j.topLogprobs, j.tokensAsIDs)
	case j.echo && prompt != nil:
		if j.echoOnly {
			ps = nil
		}
		ps = append(slices.Clip(prompt), ps...)
	}
	return completionLogprobsOf(ps, g.j.topLogprobs, offset, g.j.tokensAsIDs)
}

// promptLogprobs is the prompt_logprobs field of a whole reply: the prompt's positions when the
// request gave it, else nil (left out).
func (g *generation) promptLogprobs() promptLogprobs {
	if !g.j.showPrompt {
		return nil
	}
	return g.prompt
}

// echoed is the text of a choice's first chunk (or whole text) with echo: the prompt's text and
// text, or the prompt's alone with max_tokens 0 (vLLM's echo_without_generation).
func (j *job) echoed(text string) string {
	switch {
	case !j.echo:
		return text
	case j.echoOnly:
		return j.echoTexts[0]
	}
	return j.echoTexts[0] + text
}

// chunkUsage is the usage field of a stream chunk sent once sent tokens have been: left out
// without include_usage, null with it, those tokens with continuous_usage_stats (vLLM's chat role
// chunk, sent before any token, counts 0).
func (g *generation) chunkUsage(sent int) any {
	switch {
	case !g.j.usage:
		return nil
	case g.j.continuous:
		return g.usageOf(sent)
	}
	return json.RawMessage("null")
}

// usage counts the request's tokens as answered.
func (g *generation) usage() *usage { return g.usageOf(len(g.tokens)) }

func (g *generation) usageOf(completion int) *usage {
	p := len(g.j.req.Tokens)
	return &usage{PromptTokens: p, CompletionTokens: completion, TotalTokens: p + completion}
}
