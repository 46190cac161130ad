//go:build race

package counter

const raceEnabled = true
