//go:build !race

package engine

// raceEnabled: see random_race_test.go.
const raceEnabled = false
