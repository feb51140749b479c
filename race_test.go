//go:build race

package main

// raceEnabled: the race detector slows the engine and the HTTP path many times over, so the
// full-size acceptance runs shrink under -race (they run full-size in the plain `go test`).
const raceEnabled = true
