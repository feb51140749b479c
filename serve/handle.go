package serve

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"time"

	"rosetop/sched"
)

// generate handles a completions or chat completions request: parse, admit, submit, then answer
// with the whole reply or a stream.
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
	submitted, e := s.admit(r.Context())
	if submitted == nil {
		if e != nil {
			s.writeError(w, e)
		}
		return
	}
	st, err := s.eng.Submit(r.Context(), j.req)
	submitted()
	if err != nil {
		if e := submitError(r, j, err); e != nil {
			s.writeError(w, e)
		}
		return
	}
	g := newGeneration(j, st, &s.model)
	rp := newReplier(j, s.model.ID, time.Now())
	info.id, info.stream, info.prompt = rp.id, j.stream, len(j.req.Tokens)
	if j.stream {
		s.streamReply(w, r, g, rp)
	} else {
		s.wholeReply(w, r, g, rp)
	}
	info.completion, info.finish = len(g.tokens), g.finish
	if g.rec != nil && g.rec.Times.FirstToken > 0 {
		info.ttft = g.rec.Times.FirstToken - g.rec.Times.SubmitStart
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

// admit answers 503 while shutting down and 429 past Options.MaxQueue waiting requests; else the
// caller submits and then calls submitted. With a limit, the check and the Submit after it hold
// s.admitting, so that requests arriving together are counted one after another, not each against
// a queue that none of them has entered yet. submitted and e are both nil when ctx ended first.
func (s *Server) admit(ctx context.Context) (submitted func(), e *apiError) {
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
	if n := s.eng.Waiting(); n >= s.opts.MaxQueue {
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

// wholeReply waits for the request to end and answers with the whole reply.
func (s *Server) wholeReply(w http.ResponseWriter, r *http.Request, g *generation, rp *replier) {
	var text strings.Builder
	for {
		piece, done, err := g.next(r.Context())
		if err != nil {
			if e := failure(r, g, err); e != nil {
				s.writeError(w, e)
			}
			return
		}
		text.WriteString(piece)
		if done {
			break
		}
	}
	s.writeJSON(w, http.StatusOK, rp.whole(text.String(), g.finish, g.tokens, g.j.req.Tokens, g.usage()))
	if g.rec == nil {
		g.drain(r.Context()) // cancelled on a stop string: wait until it has left the scheduler
	}
}

// streamReply answers with a stream: a chunk per token event (the first of a chat reply after a
// chunk with the role), the last with the finish reason, the usage chunk when asked for, and
// [DONE]. An error after the headers went out is sent as an event with OpenAI's error object.
func (s *Server) streamReply(w http.ResponseWriter, r *http.Request, g *generation, rp *replier) {
	out := newSSE(w, s.opts.WriteTimeout)
	if out.start() != nil {
		g.gone()
		return
	}
	sent := 0 // tokens sent in chunks so far
	for first := true; ; first = false {
		piece, done, err := g.next(r.Context())
		if err != nil {
			if e := failure(r, g, err); e != nil && out.send(errorBody{e}) == nil {
				out.done()
			}
			return
		}
		var prompt []int32 // return_token_ids: the prompt's ids go with the first chunk
		if first {
			prompt = g.j.req.Tokens
			if rp.chat { // the first chunk is the role chunk
				if out.send(rp.chunk("", nil, true, nil, prompt, g.chunkUsage(0))) != nil {
					g.gone()
					return
				}
				prompt = nil
			}
		}
		var finish *string
		if done {
			finish = &g.finish
		}
		if out.send(rp.chunk(piece, finish, false, g.tokens[sent:], prompt, g.chunkUsage(len(g.tokens)))) != nil {
			g.gone()
			return
		}
		sent = len(g.tokens)
		if done {
			break
		}
	}
	if g.j.usage && out.send(rp.usageChunk(g.usage())) != nil || out.done() != nil {
		g.gone()
		return
	}
	if g.rec == nil {
		g.drain(r.Context()) // cancelled on a stop string: wait until it has left the scheduler
	}
}
