package main

// preset is a named job: the command line of one seed post, as flag name/value pairs applied to
// every flag the user did not give explicitly.
type preset struct {
	Name  string
	Seed  string // the post it reproduces
	Flags [][2]string
}

// jobs returns the four presets of DESIGN.md ("Benchmark jobs"). Every seed runs with
// --no-prefix-cache and --warmup-runs 1; all but 002's relative baseline use --no-stop-on-eos.
func jobs() []preset {
	common := [][2]string{{"no-stop-on-eos", "true"}, {"no-prefix-cache", "true"}, {"warmup-runs", "1"}}
	return []preset{
		{Name: "decode-heavy", Seed: "000", Flags: append([][2]string{
			{"prompt", "Hello"}, {"unique-prompts", "true"}, {"num-requests", "64"}, {"max-new-tokens", "256"},
			{"max-batch-size", "64"}, {"prefill-max-batch-size", "64"}, {"submit-interval-ms", "0"},
			{"paged-attn", "true"}, {"cuda-graph", "true"}, {"repeat-runs", "3"},
		}, common...)},
		{Name: "admission", Seed: "001", Flags: append([][2]string{
			{"prompt", "Hello"}, {"unique-prompts", "true"}, {"num-requests", "256"}, {"max-new-tokens", "64"},
			{"max-batch-size", "64"}, {"prefill-max-batch-size", "16"}, {"submit-interval-ms", "0"},
			{"paged-attn", "true"}, {"cuda-graph", "true"}, {"repeat-runs", "1"},
		}, common...)},
		{Name: "prefill-heavy", Seed: "002", Flags: append([][2]string{
			{"prompt", "Hello"}, {"prompt-repeats", "256"}, {"unique-prompts", "true"}, {"num-requests", "256"},
			{"max-new-tokens", "1"}, {"max-batch-size", "16"}, {"prefill-max-batch-size", "16"},
			{"submit-interval-ms", "1"}, {"submit-schedule", "absolute"}, {"repeat-runs", "1"},
		}, common...)},
		{Name: "paced", Seed: "003", Flags: append([][2]string{
			{"prompt", "Hello"}, {"pretok", "true"}, {"tokenize-workers", "0"}, {"stream-interval", "8"},
			{"num-requests", "64"}, {"max-new-tokens", "128"}, {"max-batch-size", "64"},
			{"prefill-max-batch-size", "64"}, {"submit-interval-ms", "20"}, {"submit-schedule", "absolute"},
			{"paged-attn", "true"}, {"cuda-graph", "true"}, {"repeat-runs", "1"},
		}, common...)},
	}
}

// jobNames lists the valid --job values.
func jobNames() []string {
	var names []string
	for _, j := range jobs() {
		names = append(names, j.Name)
	}
	return names
}

func jobByName(name string) (preset, bool) {
	for _, j := range jobs() {
		if j.Name == name {
			return j, true
		}
	}
	return preset{}, false
}
