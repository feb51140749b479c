package serve

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"rosetop/sched"
)

// generate handles a completions or chat completions request: parse, admit, submit a request a
// choice (n for each prompt), then answer with the whole reply or a stream.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, info *reqInfo, parse func([]byte, *Model) (*job, *apiError)) {
	if e := checkJSON(r); e != nil {
		s.writeError(w, e)
		return
	}
	body, e := s.readBody(w, r)
	if e != nil {
		s.writeError(w, e)
		return
	}
	j, e := parse(body, &s.model)
	if e != nil {
		s.writeError(w, e)
		return
	}
	submitted, e := s.admit(r.Context(), j.choices())
	if submitted == nil {
		if e != nil {
			s.writeError(w, e)
		}
		return
	}
	gs := make([]*generation, j.choices())
	for i := range gs {
		c := j.choice(i)
		st, err := s.eng.Submit(r.Context(), c.request(&s.model))
		if err != nil {
			submitted()
			for _, g := range gs[:i] {
				g.st.Cancel()
			}
			if e := submitError(r, j, err); e != nil {
				s.writeError(w, e)
			}
			return
		}
		gs[i] = newGeneration(c, st, &s.model)
	}
	submitted()
	rp := newReplier(j, s.model.ID, time.Now())
	info.id, info.stream = rp.id, j.stream
	if j.stream {
		s.streamReply(w, r, gs, rp)
	} else {
		s.wholeReply(w, r, gs, rp)
	}
	finishes := make([]string, len(gs))
	for i, g := range gs {
		info.completion += len(g.tokens)
		finishes[i] = g.finish
	}
	info.prompt, info.finish = totalUsage(gs).PromptTokens, strings.Join(finishes, ",")
	if t := gs[0].first; t != nil && t.FirstToken > 0 { // the times its record carries, also when cancelled
		info.ttft = t.FirstToken - t.SubmitStart
	}
}

// checkJSON answers a 400 unless the request says its body is JSON, with vLLM's message: a
// form or text body (curl -d sends one) is not parsed as if it were.
func checkJSON(r *http.Request) *apiError {
	ct := r.Header.Get("Content-Type")
	if mt, _, _ := strings.Cut(ct, ";"); strings.EqualFold(strings.TrimSpace(mt), "application/json") {
		return nil
	}
	if ct == "" {
		return badRequest("", "", "Unsupported Media Type: Only 'application/json' is allowed; the request has no Content-Type (send Content-Type: application/json)")
	}
	return badRequest("", "", "Unsupported Media Type: Only 'application/json' is allowed, not Content-Type %.60q", ct)
}

// admit answers 503 while shutting down and 429 where the k requests (a request's choices) would
// queue past Options.MaxQueue waiting ones (an empty queue takes any k); else the caller submits
// and then calls submitted. With a limit, the check and the Submit after it hold
// s.admitting, so that requests arriving together are counted one after another, not each against
// a queue that none of them has entered yet. submitted and e are both nil when ctx ended first.
func (s *Server) admit(ctx context.Context, k int) (submitted func(), e *apiError) {
	if s.draining.Load() {
		return nil, newAPIError(http.StatusServiceUnavailable, typeServer, "", "shutting_down", "%v", errShutdown)
	}
	if s.opts.MaxQueue == 0 {
		return func() {}, nil
	}
	select {
	case s.admitting <- struct{}{}:
	case <-ctx.Done():
		return nil, nil
	}
	submitted = func() { <-s.admitting }
	if n := s.eng.Waiting(); n >= s.opts.MaxQueue || n > 0 && n+k > s.opts.MaxQueue {
		submitted()
		e := newAPIError(http.StatusTooManyRequests, typeRateLimit, "", "rate_limit_exceeded",
			"the server is overloaded: %d requests are waiting (--max-queue %d); retry later", n, s.opts.MaxQueue)
		e.retryAfter = int(math.Ceil(s.opts.RetryAfter.Seconds()))
		return nil, e
	}
	return submitted, nil
}

// submitError maps Submit's error onto a reply; nil when the client has gone.
func submitError(r *http.Request, j *job, err error) *apiError {
	switch {
	case errors.Is(err, sched.ErrBadRequest):
		return badRequest(j.promptParam(), "", "%v", err)
	case errors.Is(err, sched.ErrClosed) || shuttingDown(r):
		return newAPIError(http.StatusServiceUnavailable, typeServer, "", "shutting_down", "%v", errShutdown)
	case r.Context().Err() != nil:
		return nil
	}
	return newAPIError(http.StatusInternalServerError, typeServer, "", "", "submitting the request: %v", err)
}

// failure maps a generation's error onto a reply; nil when the client has gone. A request whose
// context ended (client gone or shutdown) is cancelled here.
func failure(r *http.Request, g *generation, err error) *apiError {
	g.finish = "error"
	if r.Context().Err() != nil {
		g.gone()
		if !shuttingDown(r) {
			return nil
		}
		err = errShutdown
	}
	if errors.Is(err, errEngine) {
		return newAPIError(http.StatusInternalServerError, typeServer, "", "", "%v", err)
	}
	return newAPIError(http.StatusServiceUnavailable, typeServer, "", "shutting_down", "%v", err)
}

// wholeReply waits for every choice to end and answers with the whole reply.
func (s *Server) wholeReply(w http.ResponseWriter, r *http.Request, gs []*generation, rp *replier) {
	as := make([]answer, len(gs))
	var promptLPs promptLogprobs // the prompt's first choice's, for all its choices
	for i, g := range gs {
		var text strings.Builder
		for {
			piece, done, err := g.next(r.Context())
			if err != nil {
				if e := failure(r, g, err); e != nil {
					s.writeError(w, e)
				}
				cancelRest(gs[i+1:])
				return
			}
			text.WriteString(piece)
			if done {
				break
			}
		}
		if g.j.firstOfPrompt {
			promptLPs = g.promptLogprobs()
		}
		as[i] = answer{text: g.j.echoed(text.String()), finish: g.finish, tokens: g.tokens, prompt: g.j.req.Tokens,
			logprobs: g.logprobsOf(g.prompt, g.lps, 0), promptLogprobs: promptLPs}
	}
	s.writeJSON(w, http.StatusOK, rp.whole(as, totalUsage(gs)))
	for _, g := range gs {
		if g.matched && g.rec == nil {
			g.drain(r.Context()) // ended by a stop string or stop id: wait until it has left the scheduler
		}
	}
}

// streamReply answers with a stream: for each choice a chunk per token event (for chat after a
// chunk with the role), the last with its finish reason; then the usage chunk when asked for,
// and [DONE]. An error after the headers went out is sent as an event with OpenAI's error object,
// and the other choices are cancelled.
func (s *Server) streamReply(w http.ResponseWriter, r *http.Request, gs []*generation, rp *replier) {
	out := newSSE(w, s.opts.WriteTimeout)
	if out.start() != nil {
		cancelRest(gs)
		return
	}
	evs := readChoices(r.Context(), gs)
	defer evs.stop()
	started := make([]bool, len(gs)) // the choice's first chunk went out
	promptSent := false              // a chat reply's prompt ids (return_token_ids): once, at the top
	// sentLen: the text each choice's chunks have sent, in code points: the text_offset of a
	// completion chunk's first token (vLLM's previous_text_lens, the echoed prompt included).
	sentLen := make([]int, len(gs))
	sendFailed := func() {
		evs.stop()
		cancelRest(gs)
	}
	for ended := 0; ended < len(gs); {
		ev := evs.next()
		g := gs[ev.i]
		if ev.err != nil {
			evs.stop()
			if e := failure(r, g, ev.err); e != nil && out.send(errorBody{e}) == nil {
				out.done()
			}
			cancelRest(gs)
			return
		}
		p := piece{text: ev.text, tokens: ev.ids}
		if !started[ev.i] {
			started[ev.i] = true
			p.text = g.j.echoed(p.text) // vLLM sends the echoed prompt with the choice's first tokens
			p.prompt = g.j.req.Tokens   // return_token_ids: the prompt's ids go with a choice's first chunk
			if rp.chat {                // a choice's first chunk is its role chunk
				role := piece{role: true, prompt: p.prompt}
				if promptSent {
					role.prompt = nil
				}
				promptSent = true
				if out.send(rp.chunk(ev.i, role, g.chunkUsage(0))) != nil {
					sendFailed()
					return
				}
				p.prompt = nil
			}
		}
		if ev.done {
			p.finish = &ev.finish
		}
		p.logprobs = g.logprobsOf(ev.prompt, ev.lps, sentLen[ev.i])
		sentLen[ev.i] += utf8.RuneCountInString(p.text)
		if out.send(rp.chunk(ev.i, p, g.chunkUsage(ev.count))) != nil {
			sendFailed()
			return
		}
		if ev.done {
			ended++
		}
	}
	evs.stop()
	if gs[0].j.usage && out.send(rp.usageChunk(totalUsage(gs))) != nil || out.done() != nil {
		cancelRest(gs)
		return
	}
	for _, g := range gs {
		if g.matched && g.rec == nil {
			g.drain(r.Context()) // ended by a stop string or stop id: wait until it has left the scheduler
		}
	}
}
