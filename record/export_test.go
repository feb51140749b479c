package record

import "rosetop/bench"

// WriteViews records views and keys (by the index of the view they follow) to path, every one
// of them (a Recorder keeps only the newest of the views offered while it writes), and closes it.
func WriteViews(path string, meta Meta, views []*bench.View, keys map[int]KeyPress) error {
	w, err := newWriter(path, meta)
	if err != nil {
		return err
	}
	for i, v := range views {
		w.view(v)
		if k, ok := keys[i]; ok {
			w.key(k)
		}
	}
	return w.close()
}

// WriteSynth records n views of a Synth seeded with seed to path, streaming (views are not
// kept), and closes it.
func WriteSynth(path string, n int, seed uint64) error {
	w, err := newWriter(path, Meta{Tool: "rosetop test", Command: "dashboard", Tick: DefaultTick})
	if err != nil {
		return err
	}
	s := NewSynth(seed)
	for range n {
		w.view(s.Next())
	}
	return w.close()
}
