package bench

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"rosetop/engine/tokenizer"
	"rosetop/sched"
)

// fakeRequest is a completed request of n tokens spaced gap apart, submitted at start.
func fakeRequest(id int, start time.Duration, n int, gap time.Duration) *RequestResult {
	t := sched.Times{SubmitStart: start, SubmitEnd: start + 10*time.Microsecond}
	t.Tokenized, t.Admitted = t.SubmitEnd, t.SubmitEnd+time.Millisecond
	t.FirstToken = t.Admitted + 2*time.Millisecond
	for i := 0; i < n; i++ {
		t.Tokens = append(t.Tokens, t.FirstToken+time.Duration(i)*gap)
	}
	t.Finished = t.Tokens[n-1]
	return &RequestResult{Record: &sched.Record{ID: sched.RequestID(id), Reason: sched.FinishLength, Output: make([]int32, n), Times: t}}
}

// TestLiveStateStaysBounded feeds an hour of load into the dashboard state: every series stays
// at its cap, and the rolling window only holds its last span.
func TestLiveStateStaysBounded(t *testing.T) {
	l := newLiveState(30 * time.Second)
	at := time.Duration(0)
	for i := 0; i < 20000; i++ {
		at += 180 * time.Millisecond // 20000 steps over an hour
		l.addStep(sched.Snapshot{Step: uint64(i), At: at, Admitted: 1, Waiting: i % 7, Running: 3, Preemptions: uint64(i / 1000)}, 4)
		r := fakeRequest(i, at-50*time.Millisecond, 8, time.Millisecond+time.Duration(i%13)*time.Microsecond)
		if i%2 == 0 { // streamed token by token, as the scheduler does
			for _, e := range streamEvents(r.Record) {
				l.addEvent(at, &e)
			}
		} else { // measured at finish, as for a server whose events carry no First
			l.addRequest(at, r)
		}
		l.log(at, LogInfo, "x")
		l.mark(at, "m")
		if i%100 == 0 {
			l.steady.push(Summary{Label: fmt.Sprint(i)})
			l.rolling(at)
		}
	}
	v := l.view(time.Time{}, at, Header{}, nil)
	if len(v.Admissions) != admitCap || len(v.ITL) != itlRecentCap ||
		len(v.Events) != eventCap || len(v.Markers) != markerCap || len(v.Steady) != steadyCap || len(v.SlowITL) != slowShown {
		t.Errorf("sizes: admissions %d itl %d events %d markers %d steady %d slow %d",
			len(v.Admissions), len(v.ITL), len(v.Events), len(v.Markers), len(v.Steady), len(v.SlowITL))
	}
	for _, tl := range append(append([]Timeline(nil), v.Queue...), v.P99...) {
		for i, tr := range tl.Tracks {
			if n := len(tr.Points); n > 1200 || (tr.Span > 0 && time.Duration(n)*tr.Width > tr.Span) {
				t.Errorf("%s track %d: %d points of %v over a span of %v", tl.Name, i, n, tr.Width, tr.Span)
			}
		}
	}
	// 30 s of steps at 180 ms: 167 requests in the TTFT window; each has TTFT 10 us + 1 ms + 2 ms.
	ttft := v.Latency[0]
	if ttft.Name != "TTFT" || ttft.Dist.N != 167 || math.Abs(ttft.Dist.P99-3.01) > 1e-9 {
		t.Errorf("TTFT window = %+v", ttft)
	}
	if len(l.open) != 0 {
		t.Errorf("%d finished requests still open", len(l.open))
	}
	if v.QueueLast.At != at {
		t.Error("the newest queue point is not the last step's")
	}
}

func TestRingOverwritesOldest(t *testing.T) {
	r := newRing[int](3)
	for i := 1; i <= 5; i++ {
		r.push(i)
	}
	if got := fmt.Sprint(r.slice()); got != "[3 4 5]" {
		t.Errorf("ring = %s, want [3 4 5]", got)
	}
}

func TestUniqueMarkers(t *testing.T) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	spec := testConfig().Workload
	spec.UniquePrompts, spec.NumRequests, spec.PromptRepeats = true, 300, 3
	w, err := buildPromptWorkload(spec, ModelInfo{Codec: tok, Vocab: tok.VocabSize(), MaxPositions: 1024}, 0)
	if err != nil {
		t.Fatal(err)
	}
	first := map[int32]int{}
	for i, ids := range w.tokens {
		marker, rest, ok := strings.Cut(w.texts[i], " ")
		if !ok || rest != "HelloHelloHello" || !asciiWord(marker) {
			t.Fatalf("prompt %d = %q, want \"<marker> HelloHelloHello\"", i, w.texts[i])
		}
		if j, dup := first[ids[0]]; dup {
			t.Fatalf("prompts %d and %d share their first token %d", j, i, ids[0])
		}
		first[ids[0]] = i
	}
	if _, err := UniqueMarkers(tok, 1, 258); err == nil {
		t.Error("ids below 258 hold no marker word: UniqueMarkers must fail")
	}
}

// BenchmarkView is the cost of publishing one View with full series (the dashboard reads one
// per tick; the recorder builds one at most every 50 ms).
func BenchmarkView(b *testing.B) {
	l := newLiveState(30 * time.Second)
	at := time.Duration(0)
	for i := 0; i < 5000; i++ {
		at += 10 * time.Millisecond
		l.addStep(sched.Snapshot{Step: uint64(i), At: at, Admitted: 1}, 4)
		l.addRequest(at, fakeRequest(i, at-50*time.Millisecond, 16, time.Millisecond))
	}
	b.ReportAllocs()
	for b.Loop() {
		l.view(time.Time{}, at, Header{}, nil)
	}
}

// TestSlowestSkipsLockstepTwins: requests decoded in the same batches have identical inter-token
// latencies; the slowest-requests pane shows one of them, not several identical rows.
func TestSlowestSkipsLockstepTwins(t *testing.T) {
	l := newLiveState(30 * time.Second)
	at := time.Second
	for i := 0; i < 4; i++ { // four twins: same gaps
		l.addRequest(at, fakeRequest(i, 0, 8, 3*time.Millisecond))
	}
	l.addRequest(at, fakeRequest(10, 0, 8, 2*time.Millisecond))
	l.addRequest(at, fakeRequest(11, 0, 8, time.Millisecond))
	got := l.slowest()
	if len(got) != 3 {
		t.Fatalf("%d rows, want 3 (one of the twins, then the two others)", len(got))
	}
	if got[0].ID > 3 || got[1].ID != 10 || got[2].ID != 11 {
		t.Errorf("rows %d, %d, %d: want a twin, then 10, then 11 (slowest first)", got[0].ID, got[1].ID, got[2].ID)
	}
}
