//go:build !race

package wheel_test

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
