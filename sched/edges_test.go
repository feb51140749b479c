package sched

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"rosetop/engine"
)

// TestNewRefusesHugeOutputBuffer: the output buffer sizes an allocation of every step's events;
// a size no step could use is refused by New instead of failing the first step's allocation.
func TestNewRefusesHugeOutputBuffer(t *testing.T) {
	o := Options{Backend: noopBackend{}, Layout: engine.KVLayout{BlockSize: 16, NumBlocks: 8, Paged: true},
		MaxSeqLen: 64, Config: Config{MaxBatch: 4, PrefillMaxBatch: 2}, OutputBuffer: math.MaxInt}
	s, err := New(o)
	if err == nil {
		defer s.Close()
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("New accepted output buffer %d and Step panicked: %v", o.OutputBuffer, r)
				}
			}()
			if _, err := s.Submit(Request{Tokens: []int32{1, 2}, MaxNewTokens: 2}); err != nil {
				t.Fatal(err)
			}
			s.Step()
		}()
		return
	}
	if !errors.Is(err, ErrBadConfig) {
		t.Fatalf("New: %v, want ErrBadConfig", err)
	}
}

// TestFillsContextExactly runs requests whose prompt and output fill the longest sequence
// exactly, over the CPU engine in both layouts and at n_positions: each gives Generate's tokens,
// and one token more is refused at Submit (pretokenized) or ends too_long (tokenize workers).
func TestFillsContextExactly(t *testing.T) {
	m, err := engine.LoadTiny()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, c := range []struct {
		name   string
		paged  bool
		maxSeq int
		batch  int
	}{{"paged", true, 40, 2}, {"contiguous", false, 40, 2}, {"paged n_positions", true, 0, 1}} {
		t.Run(c.name, func(t *testing.T) {
			e, err := engine.New(m, engine.Options{Device: "cpu", Paged: c.paged, MaxBatch: c.batch, MaxSeqLen: c.maxSeq, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			tok := &byteTokenizer{}
			h := newHarnessOn(t, Options{Backend: e.Backend, Layout: e.Layout, MaxSeqLen: e.MaxSeqLen(), EOS: m.Config.EOSTokenID,
				Vocab: m.Config.VocabSize, Tokenizer: tok, TokenizeWorkers: 1, BatchLimit: c.batch,
				Config: Config{MaxBatch: c.batch, PrefillMaxBatch: c.batch}}, newFakeClock())
			limit := h.s.seqCap
			var wants [][]int32
			for i, maxNew := range []int{1, 3} {
				p := make([]int32, limit-maxNew)
				for j := range p {
					p[j] = int32(33 + (j*7+i)%90)
				}
				h.submit(Request{Tokens: p, MaxNewTokens: maxNew})
				if _, err := h.s.Submit(Request{Tokens: append(p, 40), MaxNewTokens: maxNew}); !errors.Is(err, ErrBadRequest) {
					t.Fatalf("prompt %d + %d new tokens over %d: Submit = %v, want ErrBadRequest", len(p)+1, maxNew, limit, err)
				}
				text := make([]byte, len(p)+1)
				for j := range text {
					text[j] = byte(33 + j%90)
				}
				over := must(h.s.Submit(Request{Text: string(text), MaxNewTokens: maxNew}))
				h.order, h.reqs[over] = append(h.order, over), Request{MaxNewTokens: maxNew}
				want, err := e.Generate(t.Context(), p, maxNew, engine.SamplingParams{}, false, nil)
				if err != nil {
					t.Fatal(err)
				}
				wants = append(wants, want)
			}
			h.drain(4 * limit)
			for i, id := range h.order {
				r := h.records[id]
				if i%2 == 1 {
					if r.Reason != FinishTooLong {
						t.Errorf("request %d, one token over: ended %s (%v), want too_long", id, r.Reason, r.Err)
					}
					continue
				}
				if r.Reason != FinishLength || !slices.Equal(r.Output, wants[i/2]) {
					t.Errorf("request %d: %s %v, want length %v", id, r.Reason, r.Output, wants[i/2])
				}
			}
		})
	}
}

// stoppingFake is the fake backend with a hook run inside each call and Batch.Stop honoured: a
// call whose Stop is set once the hook has run writes its KV entries, then spoils them (as a
// call stopped between layers leaves them) and returns engine.ErrStopped.
type stoppingFake struct {
	*fakeBackend
	hook    func(b *engine.Batch)
	stopped int
}

func (s *stoppingFake) Step(b *engine.Batch, next []int32) error {
	if s.hook != nil {
		s.hook(b)
	}
	if err := s.fakeBackend.Step(b, next); err != nil || b.Stop == nil || !b.Stop.Load() {
		return err
	}
	for _, sq := range b.Seqs {
		for p := sq.Start; p < sq.Start+len(sq.Tokens); p++ {
			s.block(sq.Blocks[p/s.bs])[p%s.bs] = 9999
		}
	}
	s.stopped++
	return engine.ErrStopped
}

// TestRandomCancelsDuringCalls runs random workloads whose requests are cancelled or stopped
// during backend calls that honour Batch.Stop (all of a call's requests, one, or any), with a
// failing call now and then, every policy, the prefix cache and small pools. Each request ends
// once, spoiled KV entries of a stopped call are never read or served from the prefix cache
// (every request that ran to its end has the reference tokens), and the pool ends whole.
func TestRandomCancelsDuringCalls(t *testing.T) {
	stops := 0
	for seed := range uint64(150) {
		rng := rand.New(rand.NewPCG(77, seed))
		o := pagedOptions(4+rng.IntN(30), Config{})
		o.PrefixCache = rng.IntN(3) != 0
		o.EOS, o.MaxSeqLen = 7, 8+rng.IntN(50)
		randConfig := func() Config { return randKnobs(rng, 6) }
		o.Config = randConfig()
		h := newHarness(t, o)
		be := &stoppingFake{fakeBackend: h.be}
		h.s.backend = be
		failAt := -1
		if rng.IntN(4) == 0 {
			failAt = 1 + rng.IntN(40)
		}
		h.be.fail = func(call int) bool { return call == failAt }
		ends := map[RequestID]FinishReason{} // the first Cancel or Stopped call of each request
		end := func(id RequestID) {
			reason := []FinishReason{FinishCancelled, FinishStop}[rng.IntN(2)]
			if _, ok := ends[id]; !ok {
				if _, done := h.records[id]; !done {
					ends[id] = reason
				}
			}
			if reason == FinishStop {
				h.s.Stopped(id)
			} else {
				h.s.Cancel(id)
			}
		}
		be.hook = func(b *engine.Batch) {
			if rng.IntN(5) != 0 {
				return
			}
			var ids []RequestID
			for _, sq := range b.Seqs {
				for _, q := range h.s.loop.running {
					if q.seq == sq.ID {
						ids = append(ids, q.id)
					}
				}
			}
			if len(ids) != len(b.Seqs) {
				t.Fatalf("seed %d: a call of %d sequences, %d of them running requests", seed, len(b.Seqs), len(ids))
			}
			switch rng.IntN(3) {
			case 0:
				for _, id := range ids {
					end(id)
				}
			case 1:
				end(ids[rng.IntN(len(ids))])
			default:
				end(h.order[rng.IntN(len(h.order))])
			}
		}
		shared := [][]int32{prompt(1, 40), prompt(2, 40)}
		for step := 0; len(h.order) < 30 || len(h.records) < len(h.order); step++ {
			if len(h.order) < 30 && rng.IntN(2) == 0 {
				p := shared[rng.IntN(2)][:1+rng.IntN(30)]
				if rng.IntN(3) == 0 {
					p = prompt(int32(100+len(h.order)), 1+rng.IntN(30))
				}
				r := Request{Tokens: p, MaxNewTokens: 1 + rng.IntN(20), StopOnEOS: rng.IntN(2) == 0}
				if len(p)+r.MaxNewTokens <= h.s.seqCap {
					h.submit(r)
				}
			}
			if rng.IntN(20) == 0 {
				if err := h.s.SetConfig(randConfig()); err != nil {
					t.Fatal(err)
				}
			}
			out, err := h.s.Step()
			if err != nil && !errors.Is(err, errFake) {
				t.Fatalf("seed %d: Step: %v", seed, err)
			}
			h.check(out)
			if t.Failed() || step > 20000 {
				t.Fatalf("seed %d, step %d: %d of %d requests finished", seed, step, len(h.records), len(h.order))
			}
		}
		h.drain(10)
		h.checkOutputs()
		for id, reason := range ends {
			if r := h.records[id]; r.Reason != reason && r.Reason != FinishLength && r.Reason != FinishEOS && r.Reason != FinishError {
				t.Errorf("seed %d: request %d ended %s, its first end call said %s", seed, id, r.Reason, reason)
			}
		}
		stops += be.stopped
		if t.Failed() {
			t.Fatalf("seed %d: options %+v", seed, o)
		}
	}
	if stops == 0 {
		t.Fatal("no call was stopped")
	}
	t.Logf("%d stopped calls", stops)
}
