//go:build race

package engine

// raceEnabled: the race detector slows the weight generator about twentyfold, so tests that
// build full-size models skip under -race (they run in the plain `go test` and the benchmarks).
const raceEnabled = true
