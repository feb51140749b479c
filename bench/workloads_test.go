package bench

import "testing"

// TestWorkloadsReuse: the same spec on the same model is built once; another spec, or no cache,
// builds anew.
func TestWorkloadsReuse(t *testing.T) {
	model := gpt2Model(t, 1024)
	spec := Workload{Prompt: "Hello", PromptRepeats: 1, UniquePrompts: true, NumRequests: 4, MaxNewTokens: 8}
	b := testBuild(2)
	c := &Workloads{}
	first, err := c.get(b, spec, model, 0)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.get(b, spec, model, 0); err != nil || again != first {
		t.Errorf("the same spec again: %p (%v), want the workload built first, %p", again, err, first)
	}
	other := spec
	other.NumRequests = 5
	if w, err := c.get(b, other, model, 0); err != nil || w == first || len(w.tokens) != 5 {
		t.Errorf("another spec: %p with %d requests (%v), want a new workload of 5", w, len(w.tokens), err)
	}
	var none *Workloads
	if w, err := none.get(b, spec, model, 0); err != nil || w == first || len(w.tokens) != 4 {
		t.Errorf("no cache: %p (%v), want a workload of its own", w, err)
	}
}
