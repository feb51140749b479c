package serve

import (
	"context"
	"slices"
	"sync"
)

// choiceEvent is what a stream sends for choice i after one read of its generation: the text
// that can go out, the ids it adds and the count so far, and once done the finish reason.
type choiceEvent struct {
	i      int
	text   string
	ids    []int32      // the output ids since the choice's last event
	lps    []lpPosition // with logprobs: those ids' logprobs
	prompt []lpPosition // the choice's first event, with prompt logprobs asked: the prompt's
	count  int          // output ids so far
	done   bool
	finish string
	err    error
}

// step reads g's next piece as choice i's event; sent counts the ids already in its events.
func (g *generation) step(ctx context.Context, i int, sent *int) choiceEvent {
	text, done, err := g.next(ctx)
	if err != nil {
		return choiceEvent{i: i, err: err}
	}
	ev := choiceEvent{i: i, text: text, ids: slices.Clone(g.tokens[*sent:]), count: len(g.tokens), done: done}
	if g.lpdec != nil {
		ev.lps = slices.Clone(g.lps[*sent:])
	}
	if *sent == 0 {
		ev.prompt = g.prompt // set once, by the first token event, and never written again
	}
	if done {
		ev.finish = g.finish
	}
	*sent = ev.count
	return ev
}

// choiceEvents merges the choices' events, in the order they come. With one choice the handler's
// goroutine reads it; with more, a goroutine a choice does, and owns its generation until stop
// has returned. After an event with an error or a done one, no more come for that choice.
type choiceEvents struct {
	next func() choiceEvent // blocks until an event comes; call only while a choice is not done
	stop func()             // ends the reading and waits for it; idempotent
}

func readChoices(ctx context.Context, gs []*generation) choiceEvents {
	if len(gs) == 1 {
		sent := 0
		return choiceEvents{next: func() choiceEvent { return gs[0].step(ctx, 0, &sent) }, stop: func() {}}
	}
	// Each reader delivers every event, its last (done or an error: the client gone is one) too;
	// only stop, which cancels ctx and closes quit, makes it leave without delivering.
	ctx, cancel := context.WithCancel(ctx)
	ch, quit := make(chan choiceEvent), make(chan struct{})
	var wg sync.WaitGroup
	for i, g := range gs {
		wg.Go(func() {
			for sent := 0; ; {
				ev := g.step(ctx, i, &sent)
				select {
				case ch <- ev:
				case <-quit:
					return
				}
				if ev.done || ev.err != nil {
					return
				}
			}
		})
	}
	var once sync.Once
	return choiceEvents{next: func() choiceEvent { return <-ch }, stop: func() {
		once.Do(func() {
			close(quit)
			cancel()
			wg.Wait()
		})
	}}
}

// cancelRest cancels the choices that have not ended (once no goroutine reads them).
func cancelRest(gs []*generation) {
	for _, g := range gs {
		if g.finish == "" {
			g.gone()
		}
	}
}

// totalUsage counts a request's tokens as vLLM does: each prompt once, every choice's output.
func totalUsage(gs []*generation) *usage {
	var u usage
	for _, g := range gs {
		if g.j.firstOfPrompt {
			u.PromptTokens += len(g.j.req.Tokens)
		}
		u.CompletionTokens += len(g.tokens)
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return &u
}
